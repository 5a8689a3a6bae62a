// What the offload planner is asked and what it answers: plain data, so both cross the Worker
// boundary by structured clone (Map included).

import type { PlanCosts } from "./latency_model.ts";

/** One decoding request, as of the step the plan will first apply to. */
export interface PlanRequest {
  id: number;
  /** Context length: prompt plus generated tokens. */
  tokens: number;
  /** KV blocks one layer of the request holds now. */
  blocksPerLayer: number;
  /** Context it stops at (prompt plus max_tokens): its blocks grow no further. Default: unbounded. */
  finalTokens?: number;
  /** Tokens deposited in its buffer and not yet read: cover for slow steps. */
  bufferedTokens: number;
  /** Time-between-tokens SLO; absent or 0: none, the request never limits the plan. */
  tbtSloMs?: number;
  /** Tokens/s its reader takes; absent or 0: unpaced. */
  readingRate?: number;
}

export interface PlanInput {
  requests: PlanRequest[];
  numLayers: number;
  /** Bytes of one KV block (one layer, K and V). */
  blockBytes: number;
  /** Tokens per block: with it, blocks grow over the window and the plan holds to its end. */
  blockTokens?: number;
  /** Device blocks the batch may use: resident blocks plus the prefetch region. */
  budgetBlocks: number;
  /** Most blocks the prefetch region can hold (Infinity: bounded only by the budget). */
  prefetchRegionBlocks: number;
  /**
   * Blocks the pool keeps reserved for the prefetch region whatever the plan (part of
   * budgetBlocks). When given, they are the region term of the budget, counted once, and a plan's
   * own region need only fit under prefetchRegionBlocks; absent, the plan's region is the term.
   */
  regionReservedBlocks?: number;
  costs: PlanCosts;
  /**
   * Decode steps the plan must hold for at least (OrbitFlow's Δ_min). The planner chooses the
   * window itself (plan_batch.ts), from this up to maxWindow.
   */
  window: number;
  /** The longest window the planner may choose (Δ_max; default: `window`, a fixed window). */
  maxWindow?: number;
  /** Distances to choose from (default: candidateDistances(numLayers)). */
  candidates?: number[];
  /** The solver's time limit; past it the best plan found so far, if any, is returned. */
  timeoutMs: number;
  /** Tokens over their SLO the batch may have per step of the window, on average (default 1). */
  maxViolationsPerStep?: number;
  /** Copies one request's prefetch of one layer takes (default 2). */
  copiesPerPrefetch?: number;
  /**
   * A plan whose step is within this fraction of the best possible is accepted without searching
   * further (default orbit_planner.ts's DEFAULT_GAP, 0.5%; 0: the exact optimum).
   */
  optimalityGap?: number;
  /**
   * Answer for this batch or not at all: when it has no plan, name no request to pause (the
   * resume check of a paused request, orbit_offload.ts). Default false.
   */
  noPause?: boolean;
  /**
   * One distance for the whole batch (Fig. 14a's Batch-Uniform baseline, uniform_plan.ts) instead
   * of one per request. Default false.
   */
  batchUniform?: boolean;
  /**
   * Without Pause-Resume (Fig. 14a's steps before it): when no plan meets the SLO bound, plan the
   * whole batch within the memory budget alone (the "serve-all" stance of §3.4: an extreme offload
   * pattern and the late tokens it brings) and name no one to pause. Default false.
   */
  serveAll?: boolean;
}

export type PlanStatus =
  /** Every request keeps all its layers: nothing to solve. */
  | "all-resident"
  | "optimal"
  /** Within optimalityGap of the optimum, proved by the LP bound; not searched further. */
  | "within-gap"
  /** The solver ran out of time with a plan in hand (feasible, maybe not the best). */
  | "timedout"
  /** No plan, because the solver ran out of time before finding one: keep the last plan. */
  | "no-plan-in-time"
  /** No plan exists even after pausing one request. */
  | "infeasible";

export interface Plan {
  /** Request id → offload distance (0: keep all), for every request the plan runs. */
  distances: Map<number, number>;
  /** Predicted queue time of the next step under this plan. */
  predictedStepMs: number;
  /** Predicted step time at the window's end: what the solver minimized. */
  windowEndStepMs: number;
  /** Decode steps the plan was chosen to hold for (the planner's window, Δ). */
  window: number;
  /** Device blocks the plan needs at the window's end (resident plus the region term). */
  deviceBlocks: number;
  /** The prefetch region the plan needs at the window's end. */
  prefetchBlocks: number;
  /** Whether `distances` fits the budget and the SLO bound. */
  feasible: boolean;
  /** The request to pause because no plan for the whole batch exists. */
  pause?: number;
  status: PlanStatus;
  solveMs: number;
}
