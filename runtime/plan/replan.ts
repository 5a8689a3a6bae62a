// When the scheduler should ask for a new plan (OrbitFlow's adaptive controller): the batch
// changed, the plan's window ran out (KV grew past what it was checked for), or steps no longer
// take what the plan predicted (the cost model drifted: contention, a slower day). Otherwise the
// plan stands, so the planner runs only when something changed.

/** The plan in force, as the scheduler installed it. */
export interface PlanInForce {
  /** Ids of the requests it placed. */
  batch: readonly number[];
  /** The step it was first applied to. */
  fromStep: number;
  /** Steps it was solved for: fromStep .. fromStep + window − 1. */
  window: number;
  predictedStepMs: number;
}

/** The step just finished. */
export interface StepSeen {
  batch: readonly number[];
  step: number;
  /** Its measured time (a smoothed figure keeps one noisy step from re-planning). */
  observedStepMs: number;
}

export type ReplanReason = "no-plan" | "batch" | "window" | "drift";

/** Drift beyond which the prediction no longer describes the steps (default 20%). */
export const DRIFT_FRACTION = 0.2;

export function shouldReplan(
  prev: PlanInForce | undefined,
  now: StepSeen,
  driftFraction = DRIFT_FRACTION,
): ReplanReason | undefined {
  if (!prev) return "no-plan";
  if (!sameMembers(prev.batch, now.batch)) return "batch";
  // A solve runs during the next step: ask now if the step after it falls outside the window.
  if (now.step + 2 >= prev.fromStep + prev.window) return "window";
  const drift = Math.abs(now.observedStepMs - prev.predictedStepMs);
  if (drift > driftFraction * prev.predictedStepMs) return "drift";
  return undefined;
}

function sameMembers(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  const s = new Set(a);
  return b.every((id) => s.has(id));
}
