// A PlanSource (runtime/plan/orbit_offload.ts) that only records what the offload driver asks the
// planner, for tests of the inputs it builds.

import type { PlanSource } from "../../runtime/plan/orbit_offload.ts";
import type { PlanInput } from "../../runtime/plan/plan_types.ts";

/** Pushes every planner input into `asked`; never answers. */
export function recordingPlanSource(asked: PlanInput[]): PlanSource {
  return {
    request: (i: PlanInput) => (asked.push(i), asked.length),
    latest: () => undefined,
    latestSeq: 0,
    busy: false,
    settled: () => new Promise(() => {}),
    close: () => {},
    abandoned: 0,
    failed: 0,
  };
}
