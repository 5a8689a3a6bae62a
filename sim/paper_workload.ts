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
  /** Arrivals: all within `windowS` of 0 ("burst"), or Poisson at `rate` requests/s. */
  arrival: { kind: "burst"; windowS: number } | { kind: "poisson"; rate: number };
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

export function paperWorkload(w: PaperWorkload): WorkloadRequest[] {
  const arrive = seededRandom(subSeed(w.seed, "arrivals"));
  const lengths = seededRandom(subSeed(w.seed, "lengths"));
  let t = 0;
  return Array.from({ length: w.requests }, (_, id) => {
    t = w.arrival.kind === "burst"
      ? w.arrival.windowS * arrive()
      : t + exponential(arrive, w.arrival.rate);
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
