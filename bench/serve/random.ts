// Seeded random numbers and the small distributions a workload is drawn from. Everything here is a
// pure function of the seed, so a workload is reproducible from its flags alone.

/** mulberry32: a tiny 32-bit generator; floats in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A seed for an independent sub-stream (e.g. "arrivals" vs "lengths"), so adding draws to one
 * stream does not shift the values of another. */
export function subSeed(seed: number, stream: string): number {
  let h = (seed ^ 0x9e3779b9) >>> 0;
  for (let i = 0; i < stream.length; i++) h = Math.imul(h ^ stream.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/** Standard normal by Box–Muller (one value per call; the twin is dropped for simplicity). */
export function normal(next: () => number, mean: number, sd: number): number {
  const u = 1 - next(); // (0, 1]: log is finite
  const v = next();
  return mean + sd * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

/** Exponential with the given rate (events per unit time). */
export function exponential(next: () => number, rate: number): number {
  return -Math.log(1 - next()) / rate;
}

/** Log-normal parameterised by its median (e^mu) and the sd of the log. */
export function logNormal(next: () => number, median: number, sigma: number): number {
  return Math.exp(normal(next, Math.log(median), sigma));
}

/** A one-dimensional distribution given on the command line. */
export type Dist =
  | { kind: "fixed"; value: number }
  | { kind: "normal"; mean: number; sd: number }
  | { kind: "uniform"; lo: number; hi: number }
  | { kind: "mix"; values: number[]; weights: number[] };

/**
 * Parses "fixed:12", "normal:15:4", "uniform:10:20" or "mix:15@0.4,20@0.6" (TokenFlow's mixed-rate
 * case: 40% of readers at 15 tokens/s, 60% at 20).
 */
export function parseDist(spec: string): Dist {
  const [kind, ...rest] = spec.trim().split(":");
  const nums = (n: number) => {
    if (rest.length !== n) throw new Error(`distribution "${spec}": ${kind} takes ${n} number(s)`);
    const v = rest.map(Number);
    if (v.some((x) => !Number.isFinite(x))) throw new Error(`distribution "${spec}": not a number`);
    return v;
  };
  switch (kind) {
    case "fixed": {
      const [value] = nums(1);
      return { kind, value };
    }
    case "normal": {
      const [mean, sd] = nums(2);
      if (sd < 0) throw new Error(`distribution "${spec}": negative sd`);
      return { kind, mean, sd };
    }
    case "uniform": {
      const [lo, hi] = nums(2);
      if (hi < lo) throw new Error(`distribution "${spec}": hi < lo`);
      return { kind, lo, hi };
    }
    case "mix": {
      if (rest.length !== 1 || rest[0] === "") {
        throw new Error(`distribution "${spec}": mix:v@w,v@w`);
      }
      const parts = rest[0].split(",").map((p) => p.split("@").map(Number));
      if (parts.some((p) => p.length !== 2 || p.some((x) => !Number.isFinite(x)) || p[1] < 0)) {
        throw new Error(`distribution "${spec}": mix:v@w,v@w with weights >= 0`);
      }
      const total = parts.reduce((s, p) => s + p[1], 0);
      if (!(total > 0)) throw new Error(`distribution "${spec}": weights sum to 0`);
      return { kind, values: parts.map((p) => p[0]), weights: parts.map((p) => p[1] / total) };
    }
    default:
      throw new Error(`distribution "${spec}": unknown kind "${kind}" (fixed|normal|uniform|mix)`);
  }
}

export function sampleDist(next: () => number, d: Dist): number {
  switch (d.kind) {
    case "fixed":
      return d.value;
    case "normal":
      return normal(next, d.mean, d.sd);
    case "uniform":
      return d.lo + (d.hi - d.lo) * next();
    case "mix": {
      const u = next();
      let acc = 0;
      for (let i = 0; i < d.values.length; i++) {
        acc += d.weights[i];
        if (u < acc) return d.values[i];
      }
      return d.values[d.values.length - 1];
    }
  }
}

/** Human-readable form, e.g. "normal(mean 15, sd 4)". */
export function describeDist(d: Dist): string {
  switch (d.kind) {
    case "fixed":
      return `fixed ${d.value}`;
    case "normal":
      return `normal(mean ${d.mean}, sd ${d.sd})`;
    case "uniform":
      return `uniform(${d.lo}, ${d.hi})`;
    case "mix":
      return `mix(${
        d.values.map((v, i) => `${v} @ ${Math.round(d.weights[i] * 1000) / 10}%`).join(", ")
      })`;
  }
}
