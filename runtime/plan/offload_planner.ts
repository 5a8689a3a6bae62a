// What placement (runtime/placement.ts) asks of a planner that chooses offload distances for the
// whole batch (OrbitFlow's: orbit_offload.ts): it is shown the running requests before each step
// (it may start a re-plan, never waits for one), then asked each request's distance.

import type { Request } from "../request/request.ts";

export interface OffloadPlanner {
  beforeStep(running: readonly Request[]): void;
  distanceOf(req: Request): number;
  /**
   * Running requests no feasible plan could keep (OrbitFlow pauses them and evicts their layers);
   * called after beforeStep. Optional.
   */
  toPause?(running: readonly Request[]): Request[];
  /** False while the last plan needed a pause: admissions wait until a feasible plan exists. */
  feasible?(): boolean;
}
