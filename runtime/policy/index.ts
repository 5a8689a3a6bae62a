// The scheduling policies by flag name (`--sched`).

import { fcfsPolicy } from "./fcfs.ts";
import { reservePolicy } from "./reserve.ts";
import { sloPolicy } from "./slo.ts";
import { tokenflow } from "./tokenflow.ts";
import type { SchedulingPolicy } from "./policy.ts";

export type { SchedulingPolicy };

export const POLICIES = {
  fcfs: fcfsPolicy,
  reserve: reservePolicy,
  slo: sloPolicy,
  tokenflow,
} as const;
export type PolicyName = keyof typeof POLICIES;
