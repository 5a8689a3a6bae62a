// What a step costs on this adapter: compute per layer and per sampled row, and KV copies each
// way. Profiled at load (engine/kv/cost_profile.ts), re-fitted from observed step times, and read
// by the offload planner. Plain data and pure functions, so it crosses the Worker boundary.
//
// WebGPU has one queue: a copy and a step's kernels run one after the other unless the adapter
// overlaps them itself. The profile measures how much it does (`overlap`); the prediction adds
// copy time to compute time, less that share of the shorter of the two.

/** ms = fixedMs + perUnitMs × x. */
export interface Line {
  fixedMs: number;
  perUnitMs: number;
}

/** Exponentially decayed least-squares sums of (x, y) points, for re-fitting a Line. */
export interface FitSums {
  w: number;
  x: number;
  y: number;
  xx: number;
  xy: number;
}

export interface CostModel {
  numLayers: number;
  /**
   * Queue time (ms) is what every other figure measures. This is the latency the engine thread
   * adds on top to learn that submitted work is done (Deno polls the device): once per wait.
   */
  roundTripMs: number;
  /** One layer's compute for x rows (the embedding is folded into it). */
  layer: Line;
  /** The LM head and sampler for x sampled rows. */
  sample: Line;
  /** One host → device copy (queue.writeBuffer) of x bytes. */
  hostToDevice: Line;
  /** One device → host copy of x bytes: copy to staging, map, copy into host memory. */
  deviceToHost: Line;
  /**
   * One prefetch of x bytes (offload distance): staged into a mappable buffer, copied into the
   * prefetch region between two compute passes. Absent in models from before it was profiled.
   */
  prefetch?: Line;
  /** Share (0..1) of the shorter of copy and compute hidden when both are in flight together. */
  overlap: number;
  /** Decayed sums over (rows, one layer's ms) behind `layer`, for observeStep. */
  layerFit: FitSums;
}

/** What one step does, for predictStepMs and observeStep. */
export interface StepLoad {
  rows: number;
  /** Sampled rows (default 0). */
  samples?: number;
  /** Bytes copied host → device and device → host (default 0). */
  bytesIn?: number;
  bytesOut?: number;
  /** Copies each way (default: 2 — one block group's K and V — when any bytes move). */
  copiesIn?: number;
  copiesOut?: number;
  /** Bytes and copies brought into the prefetch region between layers (default 0). */
  bytesPrefetch?: number;
  copiesPrefetch?: number;
}

/** Weight each profiled point keeps against observed steps (one observed step weighs 1). */
export const PROFILE_WEIGHT = 8;
/** Per-observation decay of older points in observeStep: about the last 200 steps count. */
export const DECAY = 0.995;

/** Least-squares line through (x, y) points; slope and intercept clamped at >= 0. */
export function fitLine(points: readonly [number, number][]): Line {
  return lineOf(sumsOf(points, 1));
}

/** Decayed sums of `points`, each of weight `weight`. */
export function sumsOf(points: readonly [number, number][], weight: number): FitSums {
  const s: FitSums = { w: 0, x: 0, y: 0, xx: 0, xy: 0 };
  for (const [x, y] of points) addPoint(s, x, y, weight);
  return s;
}

/** The line the sums describe; with one distinct x, a flat line through the mean. */
export function lineOf(s: FitSums): Line {
  if (s.w <= 0) return { fixedMs: 0, perUnitMs: 0 };
  const mx = s.x / s.w, my = s.y / s.w;
  const vx = s.xx / s.w - mx * mx;
  const slope = vx > 1e-12 * Math.max(1, mx * mx) ? (s.xy / s.w - mx * my) / vx : 0;
  const perUnitMs = Math.max(0, slope);
  return { fixedMs: Math.max(0, my - perUnitMs * mx), perUnitMs };
}

/** ms of the step's kernels: every layer over its rows, plus the sampling tail. */
export function computeMs(m: CostModel, load: StepLoad): number {
  const samples = load.samples ?? 0;
  const layers = m.numLayers * at(m.layer, load.rows);
  return layers + (samples > 0 ? at(m.sample, samples) : 0);
}

/** ms of the step's KV copies, as if nothing overlapped them. */
export function copyMs(m: CostModel, load: StepLoad): number {
  const bytesIn = load.bytesIn ?? 0, bytesOut = load.bytesOut ?? 0;
  const copiesIn = load.copiesIn ?? (bytesIn > 0 ? 2 : 0);
  const copiesOut = load.copiesOut ?? (bytesOut > 0 ? 2 : 0);
  const bytesPrefetch = load.bytesPrefetch ?? 0;
  const copiesPrefetch = load.copiesPrefetch ?? (bytesPrefetch > 0 ? 2 : 0);
  const prefetch = m.prefetch ?? m.hostToDevice;
  return copiesIn * m.hostToDevice.fixedMs + bytesIn * m.hostToDevice.perUnitMs +
    copiesOut * m.deviceToHost.fixedMs + bytesOut * m.deviceToHost.perUnitMs +
    copiesPrefetch * prefetch.fixedMs + bytesPrefetch * prefetch.perUnitMs;
}

/** Predicted queue time (ms) of one step; add roundTripMs for its latency when waited alone. */
export function predictStepMs(m: CostModel, load: StepLoad): number {
  const c = computeMs(m, load), x = copyMs(m, load);
  return c + x - m.overlap * Math.min(c, x);
}

/**
 * The model re-fitted to one observed step of `ms` (queue time, as predictStepMs gives it): what
 * the copies and the tail are predicted to take is set aside, and the rest, per layer, is a new
 * point of the layer line. Older points decay, so the line follows the adapter's current speed.
 */
export function observeStep(m: CostModel, load: StepLoad, ms: number): CostModel {
  if (!(ms >= 0) || load.rows < 1) return m;
  const copies = copyMs(m, load);
  const tail = (load.samples ?? 0) > 0 ? at(m.sample, load.samples!) : 0;
  const hidden = m.overlap * Math.min(copies, computeMs(m, load));
  const perLayer = Math.max(0, ms - copies + hidden - tail) / m.numLayers;
  const s = { ...m.layerFit };
  for (const k of ["w", "x", "y", "xx", "xy"] as const) s[k] *= DECAY;
  addPoint(s, load.rows, perLayer, 1);
  return { ...m, layer: lineOf(s), layerFit: s };
}

/** Weight of one step's measured copy time in the re-fitted bandwidths (an EWMA: ~10 steps). */
export const BANDWIDTH_WEIGHT = 0.1;
/** One step may say its copies ran at most this many times slower or faster than predicted. */
const MAX_COPY_RATIO = 4;
/** Copies predicted below this share of their step are too small to measure a bandwidth by. */
export const MIN_COPY_SHARE = 0.02;

/** Whether `load`'s copies are a large enough part of its step to re-fit bandwidths from. */
export function copiesMeasurable(m: CostModel, load: StepLoad): boolean {
  const x = copyMs(m, load);
  return x > 0 && x >= MIN_COPY_SHARE * predictStepMs(m, load);
}

/**
 * The copy bandwidths re-fitted to one observed step of `ms` that moved KV (OrbitFlow §3.4: the
 * effective bandwidth is updated by an EWMA from measured iterations). WebGPU times a step, not the
 * copies inside it, so their measured time is what the step took beyond its predicted compute and
 * tail (the layer line is re-fitted from steps without copies). Each line the step used moves its
 * per-byte cost toward that by BANDWIDTH_WEIGHT; per-copy costs stay as profiled. A step without
 * copies returns `m`.
 */
export function observeCopies(m: CostModel, load: StepLoad, ms: number): CostModel {
  const x = copyMs(m, load), c = computeMs(m, load);
  if (!(ms >= 0) || !(x > 0) || load.rows < 1) return m;
  // ms = c + x' − overlap·min(c, x'), solved for the copies' measured time x'.
  const s = m.overlap;
  const below = s < 1 ? (ms - c) / (1 - s) : Infinity; // x' <= c
  const measured = below <= c ? below : ms - (1 - s) * c;
  const fixed = fixedCopyMs(m, load);
  const ratio = Math.min(
    MAX_COPY_RATIO,
    Math.max(1 / MAX_COPY_RATIO, (measured - fixed) / Math.max(x - fixed, 1e-9)),
  );
  const refit = (line: Line): Line => ({
    fixedMs: line.fixedMs,
    perUnitMs: line.perUnitMs * (1 - BANDWIDTH_WEIGHT + BANDWIDTH_WEIGHT * ratio),
  });
  const next = { ...m };
  if ((load.bytesIn ?? 0) > 0) next.hostToDevice = refit(m.hostToDevice);
  if ((load.bytesOut ?? 0) > 0) next.deviceToHost = refit(m.deviceToHost);
  if ((load.bytesPrefetch ?? 0) > 0) {
    if (m.prefetch) next.prefetch = refit(m.prefetch);
    else if (!((load.bytesIn ?? 0) > 0)) next.hostToDevice = refit(m.hostToDevice);
  }
  return next;
}

/** The per-copy part of copyMs (what does not depend on bytes). */
function fixedCopyMs(m: CostModel, load: StepLoad): number {
  const bytesIn = load.bytesIn ?? 0, bytesOut = load.bytesOut ?? 0;
  const bytesPrefetch = load.bytesPrefetch ?? 0;
  return (load.copiesIn ?? (bytesIn > 0 ? 2 : 0)) * m.hostToDevice.fixedMs +
    (load.copiesOut ?? (bytesOut > 0 ? 2 : 0)) * m.deviceToHost.fixedMs +
    (load.copiesPrefetch ?? (bytesPrefetch > 0 ? 2 : 0)) * (m.prefetch ?? m.hostToDevice).fixedMs;
}

/** Bytes per ms of a copy line, as GB/s (1e9 bytes), for reports. */
export function gbPerS(line: Line): number {
  return line.perUnitMs > 0 ? 1 / line.perUnitMs / 1e6 : Infinity;
}

function at(line: Line, x: number): number {
  return line.fixedMs + line.perUnitMs * x;
}

function addPoint(s: FitSums, x: number, y: number, w: number): void {
  s.w += w;
  s.x += w * x;
  s.y += w * y;
  s.xx += w * x * x;
  s.xy += w * x * y;
}
