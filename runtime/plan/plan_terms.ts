// The numbers both planners (the ILP and brute force) work from, and the one exact check of a
// choice of distances against the budget and the SLO bound, so the two can be compared.
//
// SLO violations over a window of W steps of T ms each: a request's reader takes one token every
// i ms, where i is its TBT SLO, or its reading interval when it reads slower than that (it never
// wants tokens faster than it reads). In the window it wants W·T/i tokens; the step makes W and its
// buffer holds B, so about max(0, W·T/i − W − B) tokens reach it later than wanted: its buffered
// tokens offset its violations. The batch may have `maxViolationsPerStep` × W of them in all.
//
// Blocks grow as tokens are generated; with blockTokens given, a plan is checked and costed at
// the window's end, its worst point (memory and copies only grow).

import {
  candidateDistances,
  type Placed,
  prefetchRegionNeeded,
  residentBlocks,
} from "../kv/offload_pattern.ts";
import { predictStepMs, prefetchMs, type StepShape } from "./latency_model.ts";
import type { PlanInput, PlanRequest } from "./plan_types.ts";

export interface PlanTerms {
  input: PlanInput;
  candidates: number[];
  shape: StepShape;
  /** Per request: blocks per layer at the next step and at the window's end. */
  nextBlocks: number[];
  endBlocks: number[];
  /** Per request: ms to prefetch one of its layers at the window's end. */
  copyMs: number[];
  /** Per request: the interval its reader wants tokens at; undefined without an SLO. */
  intervalMs: (number | undefined)[];
  /** Tokens over their SLO the batch may have in the window. */
  maxViolations: number;
}

export interface Evaluation {
  stepMs: number;
  deviceBlocks: number;
  prefetchBlocks: number;
  violations: number;
  feasible: boolean;
}

/** Rounding slack for comparing the solver's floating-point answers. */
const EPS = 1e-7;

export function termsOf(input: PlanInput): PlanTerms {
  const shape: StepShape = {
    numLayers: input.numLayers,
    blockBytes: input.blockBytes,
    rows: input.requests.length,
    copiesPerPrefetch: input.copiesPerPrefetch,
  };
  const endBlocks = input.requests.map((r) => blocksAfter(r, input.window, input.blockTokens));
  return {
    input,
    candidates: input.candidates ?? candidateDistances(input.numLayers),
    shape,
    nextBlocks: input.requests.map((r) => blocksAfter(r, 1, input.blockTokens)),
    endBlocks,
    copyMs: endBlocks.map((b) => prefetchMs(input.costs, shape, b)),
    intervalMs: input.requests.map(readingIntervalMs),
    maxViolations: (input.maxViolationsPerStep ?? 1) * input.window,
  };
}

/**
 * Blocks per layer once `steps` more tokens are in, or the request has ended (blockTokens
 * unknown: as now).
 */
export function blocksAfter(r: PlanRequest, steps: number, blockTokens?: number): number {
  if (!blockTokens) return r.blocksPerLayer;
  const tokens = Math.min(r.tokens + steps, r.finalTokens ?? Infinity);
  return Math.max(r.blocksPerLayer, Math.ceil(tokens / blockTokens));
}

/** The interval (ms) a request's reader wants tokens at; undefined without an SLO. */
export function readingIntervalMs(r: PlanRequest): number | undefined {
  if (!(r.tbtSloMs! > 0)) return undefined;
  const readMs = r.readingRate! > 0 ? 1000 / r.readingRate! : 0;
  return Math.max(r.tbtSloMs!, readMs);
}

/** Tokens of request `i` that arrive late over the window if every step takes `stepMs`. */
export function lateTokens(terms: PlanTerms, i: number, stepMs: number): number {
  const interval = terms.intervalMs[i];
  if (interval === undefined) return 0;
  const w = terms.input.window;
  return Math.max(0, (w * stepMs) / interval - w - terms.input.requests[i].bufferedTokens);
}

/** The batch with distances `d` (one per request, in order) and blocks per layer `blocks`. */
export function placed(distances: readonly number[], blocks: readonly number[]): Placed[] {
  return distances.map((distance, i) => ({ distance, blocksPerLayer: blocks[i] }));
}

/** Checks and costs a choice of distances (one per request, in order) at the window's end. */
export function evaluate(terms: PlanTerms, distances: readonly number[]): Evaluation {
  const { input, shape } = terms;
  const batch = placed(distances, terms.endBlocks);
  const stepMs = predictStepMs(input.costs, shape, batch);
  const prefetchBlocks = prefetchRegionNeeded(input.numLayers, batch);
  const device = regionTermOf(input, prefetchBlocks) + residentBlocks(input.numLayers, batch);
  let violations = 0;
  for (let i = 0; i < distances.length; i++) violations += lateTokens(terms, i, stepMs);
  const feasible = device <= input.budgetBlocks &&
    prefetchBlocks <= input.prefetchRegionBlocks &&
    violations <= terms.maxViolations + EPS;
  return { stepMs, deviceBlocks: device, prefetchBlocks, violations, feasible };
}

/**
 * The prefetch region's share of the device budget (OrbitFlow §3.3.1, Eq. 1: resident blocks
 * plus one buffer). A region the pool has already set aside is that buffer, counted once; without
 * one, the plan's own need (its busiest layer) is.
 */
export function regionTermOf(input: PlanInput, prefetchBlocks: number): number {
  return input.regionReservedBlocks ?? prefetchBlocks;
}

/** Predicted time of the next step (current blocks, not the window's end). */
export function nextStepMs(terms: PlanTerms, distances: readonly number[]): number {
  return predictStepMs(terms.input.costs, terms.shape, placed(distances, terms.nextBlocks));
}
