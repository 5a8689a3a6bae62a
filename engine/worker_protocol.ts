// The typed messages between the runtime's thread and the engine Worker (engine/worker.ts).
// Plans and records are plain data, so they cross by structured clone.

import type { EngineInfo, EngineOptions, KvCopyStats, SampleRecord, StepPlan } from "./engine.ts";

export type ToEngine =
  | { type: "load"; options: Omit<EngineOptions, "gpu" | "onLoadProgress"> }
  | { type: "step"; id: number; plan: StepPlan }
  | { type: "close" };

export type FromEngine =
  | { type: "progress"; loaded: number; total: number }
  | { type: "loaded"; info: EngineInfo }
  | { type: "load-failed"; message: string }
  // The copy counters as of this step's records (its "out" copies landed), for copyStats().
  // `hidden`: the step's hidden reads (an array's own properties do not survive structured clone).
  | {
    type: "records";
    id: number;
    records: SampleRecord[];
    hidden?: Float32Array[];
    copyStats: KvCopyStats;
  }
  | { type: "step-failed"; id: number; message: string }
  | { type: "closed" };
