// The planning around a solver: skip it when every request fits whole, and when nothing fits,
// name the request to pause (OrbitFlow's Pause-Resume) and plan the others without it. The ILP
// (orbit_planner.ts) and brute force (brute_force_plan.ts) are two choosers behind this.

import { KEEP_ALL } from "./offload_pattern.ts";
import { evaluate, nextStepMs, type PlanTerms, termsOf } from "./plan_terms.ts";
import type { Plan, PlanInput, PlanStatus } from "./plan_types.ts";

/** A solver's answer: one distance per request (in order), or none with the reason. */
export interface Choice {
  distances?: number[];
  status: PlanStatus;
}

export type Chooser = (terms: PlanTerms) => Choice;

/**
 * The request to pause when no plan fits: the one with the most KV blocks plus buffered tokens. It
 * frees the most memory and copy time, and its buffer keeps its reader going longest while it
 * waits. Ties go to the request listed first.
 */
export function pauseVictim(input: PlanInput): number | undefined {
  let best: number | undefined, bestScore = -Infinity;
  for (const r of input.requests) {
    const score = r.blocksPerLayer * input.numLayers + r.bufferedTokens;
    if (score > bestScore) [best, bestScore] = [r.id, score];
  }
  return best;
}

/** Plans `input` with `choose`; pauses one request when the whole batch has no plan. */
export function planBatch(input: PlanInput, choose: Chooser): Plan {
  const t0 = performance.now();
  const first = planOnce(input, choose);
  if (first.feasible || first.status === "no-plan-in-time") {
    return { ...first, solveMs: performance.now() - t0 };
  }
  const pause = pauseVictim(input);
  // input.timeoutMs bounds both solves together.
  const timeoutMs = Math.max(0, input.timeoutMs - (performance.now() - t0));
  const rest = { ...input, timeoutMs, requests: input.requests.filter((r) => r.id !== pause) };
  const second = planOnce(rest, choose);
  return { ...second, pause, solveMs: performance.now() - t0 };
}

function planOnce(input: PlanInput, choose: Chooser): Plan {
  const terms = termsOf(input);
  const keepAll = input.requests.map(() => KEEP_ALL);
  const choice: Choice = evaluate(terms, keepAll).feasible
    ? { distances: keepAll, status: "all-resident" }
    : choose(terms);
  if (!choice.distances) {
    return {
      distances: new Map(),
      predictedStepMs: NaN,
      windowEndStepMs: NaN,
      deviceBlocks: NaN,
      prefetchBlocks: NaN,
      feasible: false,
      status: choice.status,
      solveMs: 0,
    };
  }
  const d = choice.distances;
  const e = evaluate(terms, d);
  return {
    distances: new Map(input.requests.map((r, i) => [r.id, d[i]])),
    predictedStepMs: nextStepMs(terms, d),
    windowEndStepMs: e.stepMs,
    deviceBlocks: e.deviceBlocks,
    prefetchBlocks: e.prefetchBlocks,
    feasible: e.feasible,
    status: choice.status,
    solveMs: 0,
  };
}
