// The planning around a solver: skip it when every request fits whole, and when nothing fits,
// name the request to pause (OrbitFlow's Pause-Resume) and plan the others without it. The ILP
// (orbit_planner.ts) and brute force (brute_force_plan.ts) are two choosers behind this.
//
// The window is the planner's choice too (OrbitFlow §3.3.1, the self-determined decode window Δ
// in [Δ_min, Δ_max]): a plan must hold, within the budget and the SLO bound, until its window's
// end, where blocks have grown and a deposit covers fewer steps. The planner takes the longest
// window, from Δ_min doubling up to Δ_max, whose plan costs the next step no more than
// WINDOW_SLACK over the plan for Δ_min: with ample memory and SLO margin the plan runs long
// unchecked; when growth or a tight SLO would force a worse plan, the window stays short and the
// plan is re-optimized sooner. Plans only get harder as the window grows (blocks and late tokens
// only grow), so the longest acceptable window is found by bisection over the doublings.

import { KEEP_ALL } from "../kv/offload_pattern.ts";
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

/** A longer window may cost the next step this much more than the shortest window's plan. */
export const WINDOW_SLACK = 0.02;

/** Plans `input` with `choose`; pauses one request when the whole batch has no plan. */
export function planBatch(input: PlanInput, choose: Chooser): Plan {
  const t0 = performance.now();
  // input.timeoutMs bounds every solve together.
  const left = () => Math.max(0, input.timeoutMs - (performance.now() - t0));
  const first = planWindowed(input, choose, left);
  if (first.feasible || first.status === "no-plan-in-time") {
    return { ...first, solveMs: performance.now() - t0 };
  }
  if (input.serveAll) {
    // No pause: the fastest plan that fits memory, whatever the SLO bound says.
    const all = planWindowed({ ...input, maxViolationsPerStep: Infinity }, choose, left);
    return { ...all, solveMs: performance.now() - t0 };
  }
  if (input.noPause) return { ...first, solveMs: performance.now() - t0 };
  const pause = pauseVictim(input);
  const rest = { ...input, requests: input.requests.filter((r) => r.id !== pause) };
  const second = planWindowed(rest, choose, left);
  return { ...second, pause, solveMs: performance.now() - t0 };
}

/** The windows to choose from: Δ_min doubling while under Δ_max, then Δ_max. */
export function windowChoices(min: number, max = min): number[] {
  const out = [min];
  while (out.at(-1)! * 2 < max) out.push(out.at(-1)! * 2);
  if (max > min) out.push(max);
  return out;
}

/** The plan for the longest acceptable window (header); Δ_min's plan when no longer one is. */
function planWindowed(input: PlanInput, choose: Chooser, left: () => number): Plan {
  const windows = windowChoices(input.window, input.maxWindow);
  const at = (w: number) => planOnce({ ...input, window: w, timeoutMs: left() }, choose);
  const shortest = at(windows[0]);
  if (!shortest.feasible || windows.length === 1) return shortest;
  const limit = shortest.predictedStepMs * (1 + WINDOW_SLACK) + 1e-9;
  const ok = (p: Plan) => p.feasible && p.predictedStepMs <= limit;
  // Bisection: windows[lo] is acceptable, windows[hi + 1] (if any) is not.
  let best = shortest, lo = 0, hi = windows.length - 1;
  while (lo < hi && left() > 0) {
    const mid = Math.ceil((lo + hi) / 2);
    const plan = at(windows[mid]);
    if (ok(plan)) [best, lo] = [plan, mid];
    else hi = mid - 1;
  }
  return best;
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
      window: input.window,
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
    window: input.window,
    deviceBlocks: e.deviceBlocks,
    prefetchBlocks: e.prefetchBlocks,
    feasible: e.feasible,
    status: choice.status,
    solveMs: 0,
  };
}
