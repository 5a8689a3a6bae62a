// The papers' synthetic workloads: lengths from a normal distribution (TokenFlow's controlled
// tests) or a log-normal one (ShareGPT-like), arriving as a burst or as Poisson, each request read
// at its reader's pace. Seeded: the same options give the same requests.

import { exponential, logNormal, normal, seededRandom, subSeed } from "../bench/serve/random.ts";
import type { WorkloadRequest } from "../bench/serve/workload.ts";

export type Lengths =
  | { kind: "normal"; mean: number; sd: number }
  | { kind: "lognormal"; median: number; sigma: number };

export interface PaperWorkload {
  seed: number;
  requests: number;
  /** Arrivals: all within `windowS` of 0 ("burst"), Poisson at `rate` requests/s, or gamma
   * intervals of mean 1/rate and coefficient of variation `cv` (bursty traces such as Azure's). */
  arrival:
    | { kind: "burst"; windowS: number }
    | { kind: "poisson"; rate: number }
    | { kind: "gamma"; rate: number; cv: number };
  input: Lengths;
  output: Lengths;
  /** Tokens/s each reader reads (0 or ≥ 1000: reads as fast as tokens come). */
  readingRate: number;
  sloTtftMs: number;
  sloTbtMs: number;
  /** Longest prompt + output (the model's context as the setup configures it). */
  maxContext: number;
}

function draw(next: () => number, d: Lengths): number {
  const x = d.kind === "normal" ? normal(next, d.mean, d.sd) : logNormal(next, d.median, d.sigma);
  return Math.max(1, Math.round(x));
}

/** Gamma of shape k and mean k / rate (Marsaglia–Tsang; shape < 1 boosted by U^(1/k)). */
function gamma(next: () => number, k: number, rate: number): number {
  if (k < 1) return gamma(next, k + 1, rate) * Math.pow(1 - next(), 1 / k);
  const d = k - 1 / 3, c = 1 / Math.sqrt(9 * d);
  while (true) {
    const x = normal(next, 0, 1), v = (1 + c * x) ** 3;
    if (v > 0 && Math.log(1 - next()) < x * x / 2 + d - d * v + d * Math.log(v)) {
      return d * v / rate;
    }
  }
}

export function paperWorkload(w: PaperWorkload): WorkloadRequest[] {
  const arrive = seededRandom(subSeed(w.seed, "arrivals"));
  const lengths = seededRandom(subSeed(w.seed, "lengths"));
  let t = 0;
  return Array.from({ length: w.requests }, (_, id) => {
    const a = w.arrival;
    t = a.kind === "burst"
      ? a.windowS * arrive()
      : a.kind === "poisson"
      ? t + exponential(arrive, a.rate)
      : t + gamma(arrive, 1 / (a.cv * a.cv), a.rate / (a.cv * a.cv));
    const input = Math.min(draw(lengths, w.input), w.maxContext - 1);
    const output = Math.min(draw(lengths, w.output), w.maxContext - input);
    return {
      id,
      arrivalS: t,
      promptLen: input,
      promptSeed: subSeed(w.seed, `prompt ${id}`),
      outputLen: output,
      readingRate: w.readingRate,
      sloTtftMs: w.sloTtftMs,
      sloTbtMs: w.sloTbtMs,
    };
  });
}
