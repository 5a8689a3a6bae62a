// What benchmarks use of the runtime beyond its public face (service.ts), named here so that
// bench/ reaches nothing deeper (tests/bench_imports_test.ts): the block pool to lay out KV by
// hand, the offload distance's pattern and load, decode groups' defaults, and OrbitFlow's planner
// (in its Worker, or inline for simulations).
// Re-exports only: the modules stay where the runtime keeps them.

export { BlockPool } from "./kv/block_pool.ts";
export { offloadedLayers } from "./kv/offload_pattern.ts";
export { prefetchLoad } from "./cost_tracker.ts";
export { DEFAULT_DECODE_STEPS, DEFAULT_GROUP_MS } from "./decode_group.ts";
export { orbitPlan } from "./plan/orbit_planner.ts";
export { PlannerClient } from "./plan/planner_client.ts";
// The simulation's planner: solves in process, so fake-time runs are deterministic (sim/replay.ts).
export { InlinePlanner } from "./plan/inline_planner.ts";
export { layerComputeMs, type PlanCosts } from "./plan/latency_model.ts";
export type { Plan, PlanInput, PlanRequest } from "./plan/plan_types.ts";

// Encoders behind the embedding face (bench embeddings).
export { openEncoderModel } from "./embedding/open_encoder.ts";

// Speculative decoding's drafter, for a bench's drafter of controlled acceptance.
export type { Drafter } from "./speculative/speculation.ts";
