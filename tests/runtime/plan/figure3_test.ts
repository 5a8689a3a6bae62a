// OrbitFlow's Figure 3, as numbers. Two requests on a 9-layer model; Request 1 holds 3 blocks per
// layer at Step 1 and 4 at Step 16, Request 2 holds 6 at both; the device holds 70 blocks; one
// layer computes in the time 3 blocks take to copy. Placements: A offloads layers 3, 6, 9 (1-based)
// of both requests; B keeps Request 1 whole and offloads 3 layers of Request 2; C offloads 2 layers
// of Request 1 (4 and 8) and 3 of Request 2. The paper's figures: memory A 63 → 70, B 69 → 78 (over
// the budget at Step 16), C 63 → 70; stalls A 9 → 12, B 0, C 0 → 2; so B is best at Step 1 and C at
// Step 16. Units here: 1 ms = one block's copy, so a layer is 3 ms.

import type { PlanCosts } from "../../../runtime/plan/latency_model.ts";
import { predictStepMs } from "../../../runtime/plan/latency_model.ts";
import { deviceBlocks, type Placed } from "../../../runtime/kv/offload_pattern.ts";
import { prefetchTimeline } from "../../../runtime/plan/prefetch_timeline.ts";
import { orbitPlan } from "../../../runtime/plan/orbit_planner.ts";
import { bruteForcePlan } from "../../../runtime/plan/brute_force_plan.ts";
import type { PlanInput } from "../../../runtime/plan/plan_types.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

const LAYERS = 9, LAYER_MS = 3, BUDGET = 70;
const costs: PlanCosts = {
  layer: { fixedMs: LAYER_MS, perUnitMs: 0 },
  sample: { fixedMs: 0, perUnitMs: 0 },
  hostToDevice: { fixedMs: 0, perUnitMs: 1 }, // 1 ms per byte, and a block is 1 byte
  overlap: 0,
};
const shape = { numLayers: LAYERS, blockBytes: 1, rows: 2, samples: 0 };

/** Distances: 3 offloads 0-based layers 2, 5, 8 (1-based 3, 6, 9); 4 offloads 3 and 7 (4, 8). */
const PLACEMENTS: Record<string, [number, number]> = { A: [3, 3], B: [0, 3], C: [4, 3] };
const BLOCKS = { step1: [3, 6], step16: [4, 6] };

function batch(name: string, blocks: number[]): Placed[] {
  return PLACEMENTS[name].map((distance, i) => ({ distance, blocksPerLayer: blocks[i] }));
}

const table = (f: (b: Placed[]) => number) =>
  Object.fromEntries(
    Object.keys(PLACEMENTS).map((
      p,
    ) => [p, [f(batch(p, BLOCKS.step1)), f(batch(p, BLOCKS.step16))]]),
  );

Deno.test("figure 3: device blocks (resident + prefetch region) are the paper's", () => {
  assertEquals(table((b) => deviceBlocks(LAYERS, b)), { A: [63, 70], B: [69, 78], C: [63, 70] });
});

Deno.test("figure 3: with a copy engine beside compute, the stalls are the paper's", () => {
  // Prefetches served earliest-deadline-first on one link, each as soon as its request's previous
  // host layer has computed: the reading of the figure that gives its numbers.
  const stall = (b: Placed[]) => prefetchTimeline(LAYERS, b, LAYER_MS, (n) => n).stallMs;
  assertEquals(table(stall), { A: [9, 12], B: [0, 0], C: [0, 2] });
});

Deno.test("figure 3: on one queue every copy is exposed, and the ranking still holds", () => {
  // Sluice's model (overlap 0): the step is 27 ms of compute plus every block copied. B < C < A at
  // Step 1 (B moves fewest blocks, as the paper says), and at Step 16, with B over the budget,
  // C < A: the same choices the paper's GPU makes, for a larger price.
  const copied = (b: Placed[]) => predictStepMs(costs, shape, b) - LAYERS * LAYER_MS;
  assertEquals(table(copied), { A: [27, 30], B: [18, 18], C: [24, 26] });
});

Deno.test("figure 3: the planner matches B at Step 1 and picks C at Step 16", () => {
  // At Step 1 B ties with a placement the figure does not draw: Request 1 offloading 4 layers
  // (distance 2) and Request 2 only its last (distance 9) also copies 18 blocks and needs 69.
  const input = (blocks: number[]): PlanInput => ({
    requests: blocks.map((b, i) => ({
      id: i + 1,
      tokens: 16 * b,
      blocksPerLayer: b,
      bufferedTokens: 0,
    })),
    numLayers: LAYERS,
    blockBytes: 1,
    budgetBlocks: BUDGET,
    prefetchRegionBlocks: Infinity,
    costs,
    window: 1,
    timeoutMs: 1000,
  });
  for (const plan of [orbitPlan, bruteForcePlan]) {
    const early = plan(input(BLOCKS.step1)), late = plan(input(BLOCKS.step16));
    const tied = [[[1, 0], [2, 3]], [[1, 2], [2, 9]]].map((d) => JSON.stringify(d));
    assert(tied.includes(JSON.stringify([...early.distances])), `${[...early.distances]}`);
    assertEquals([...late.distances], [[1, 4], [2, 3]]);
    assertEquals([early.windowEndStepMs, late.windowEndStepMs], [27 + 18, 27 + 26]);
    assertEquals([early.deviceBlocks, late.deviceBlocks], [69, 70]);
  }
});
