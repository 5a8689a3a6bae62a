// The messages between the planner client and its Worker: one request, one answer, in order.

import type { Plan, PlanInput } from "./plan_types.ts";

export interface ToPlanner {
  seq: number;
  input: PlanInput;
}

export type FromPlanner =
  /** Sent once the Worker has loaded: solves are timed from here, not from its start-up. */
  | { ready: true }
  | { seq: number; plan: Plan }
  | { seq: number; error: string };
