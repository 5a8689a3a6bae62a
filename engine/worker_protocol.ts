// The typed messages between the runtime's thread and the engine Worker (engine/worker.ts).
// Plans and records are plain data, so they cross by structured clone.

import type { EngineInfo, EngineOptions, SampleRecord, StepPlan } from "./engine.ts";

export type ToEngine =
  | { type: "load"; options: Omit<EngineOptions, "gpu" | "onLoadProgress"> }
  | { type: "step"; id: number; plan: StepPlan }
  | { type: "close" };

export type FromEngine =
  | { type: "progress"; loaded: number; total: number }
  | { type: "loaded"; info: EngineInfo }
  | { type: "load-failed"; message: string }
  | { type: "records"; id: number; records: SampleRecord[] }
  | { type: "step-failed"; id: number; message: string }
  | { type: "closed" };
