// `offload: "orbit"` in fake time is deterministic: the simulation plans inline (matrix_sim.ts,
// runtime/plan/inline_planner.ts), so two runs of one workload give every token the same arrival
// time, and the planner's counters agree. The cell is one where the device is too small for the
// burst, so the planner does plan and layers do leave the device.

import { applyOverrides, CELLS, cellWorkload } from "../../bench/matrix/cells.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { BUDGET_BLOCKS, simulate } from "./matrix_sim.ts";
import type { SimConfig } from "../../sim/replay.ts";

const ORBIT: SimConfig = {
  name: "orbit",
  options: { policy: "fcfs", offload: "orbit", prefixCache: true, writeThrough: true },
  hostBlocks: 65_536,
};

Deno.test("sim: two fake-time runs with OrbitFlow's planner give identical token arrival times", async () => {
  const cell = CELLS.find((c) => c.id === "chat-burst16-human-tight")!;
  const blocks = BUDGET_BLOCKS[cell.budget];
  const workload = cellWorkload(
    applyOverrides(cell, {}),
    Math.min(2048, Math.floor(blocks / 4) * 16),
  );
  const runs = [];
  for (let run = 0; run < 2; run++) runs.push(await simulate(workload, blocks, ORBIT));
  const [a, b] = runs;
  assert(a.stats.planner!.solves > 0, "the planner planned");
  assert(a.stats.offload!.blocksPrefetched > 0, "offloaded layers were prefetched");
  assertEquals(
    a.records.map((r) => r.arrivalsMs),
    b.records.map((r) => r.arrivalsMs),
  );
  assertEquals(a.stats.planner, b.stats.planner);
  assertEquals(a.stats.steps, b.stats.steps);
});
