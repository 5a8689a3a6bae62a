// An offload planner (runtime/plan/offload_planner.ts) that asks each running request for the
// distance `distanceOf` gives it, every step: tests change distances mid-stream through the same
// seam OrbitFlow's planner uses.

import type { OffloadPlanner } from "../../runtime/service.ts";

/** A distance per request, asked again every step. */
export type DistanceOf = (req: { id: number; generated: number }) => number;

export function distancePlanner(distanceOf: DistanceOf): OffloadPlanner {
  return {
    beforeStep() {},
    distanceOf: (req) => distanceOf({ id: req.id, generated: req.generated.length }),
  };
}
