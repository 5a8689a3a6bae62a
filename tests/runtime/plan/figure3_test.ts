// OrbitFlow's Figure 3, as numbers. Two requests on a 9-layer model; Request 1 holds 3 blocks per
// layer at Step 1 and 4 at Step 16, Request 2 holds 6 at both; the device holds 70 blocks; one
// layer computes in the time 3 blocks take to copy. Placements: A offloads layers 3, 6, 9 (1-based)
// of both requests; B keeps Request 1 whole and offloads 3 layers of Request 2; C offloads 2 layers
// of Request 1 (4 and 8) and 3 of Request 2. The paper's figures: memory A 63 → 70, B 69 → 78 (over
// the budget at Step 16), C 63 → 70; stalls A 9 → 12, B 0, C 0 → 2; so B is best at Step 1 and C at
// Step 16. Units here: 1 ms = one block's copy (a stall unit), so a layer is 3 ms.
//
// The paper's text says only "2 layers" for C's Request 1; 4 and 8 are what a distance gives
// (offload_pattern.ts). {4,7}, {5,7} and {5,8} give the same stalls and memory; {4,9} and {5,9}
// the same stalls, but layer 9 then brings in 10 blocks, 74 in all at Step 16.

import type { PlanCosts } from "../../../runtime/plan/latency_model.ts";
import { predictStepMs } from "../../../runtime/plan/latency_model.ts";
import {
  candidateDistances,
  deviceBlocks,
  type Placed,
} from "../../../runtime/kv/offload_pattern.ts";
import { prefetchTimeline } from "../../../runtime/plan/prefetch_timeline.ts";
import { orbitPlan } from "../../../runtime/plan/orbit_planner.ts";
import { bruteForcePlan } from "../../../runtime/plan/brute_force_plan.ts";
import { evaluate, termsOf } from "../../../runtime/plan/plan_terms.ts";
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

const table = <T>(f: (b: Placed[]) => T) =>
  Object.fromEntries(
    Object.keys(PLACEMENTS).map((
      p,
    ) => [p, [f(batch(p, BLOCKS.step1)), f(batch(p, BLOCKS.step16))]]),
  );

/**
 * The planner's question for requests of `blocks` blocks per layer: no SLO, blocks as they are
 * (no growth over the window), and no region set aside beforehand, so the region term of the
 * budget is the plan's busiest layer (Eq. 1's buffer).
 */
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

/** The planner's own check of a placement against the 70-block budget (plan_terms.ts). */
const feasible = (b: Placed[]) =>
  evaluate(termsOf(input(b.map((r) => r.blocksPerLayer))), b.map((r) => r.distance)).feasible;

/**
 * Stall units on the paper's GPU (prefetch_timeline.ts): prefetches served earliest-deadline-first
 * on one link, each as soon as its request's previous host layer has computed.
 */
const stall = (b: Placed[]) => prefetchTimeline(LAYERS, b, LAYER_MS, (n) => n).stallMs;

Deno.test("figure 3: device blocks (resident + prefetch region) are the paper's", () => {
  assertEquals(table((b) => deviceBlocks(LAYERS, b)), { A: [63, 70], B: [69, 78], C: [63, 70] });
});

Deno.test("figure 3: the planner's memory check rules out B at Step 16 and nothing else", () => {
  assertEquals(table(feasible), { A: [true, true], B: [true, false], C: [true, true] });
});

Deno.test("figure 3: with a copy engine beside compute, the stalls are the paper's", () => {
  // The reading of the figure that gives its numbers. Algorithm 1 says instead that the active
  // streams divide the link evenly: simulated exactly (same start rule, an even split), A and B
  // come out as here but C stalls 6 units at Step 1 and 7 at Step 16, not 0 and 2, so the figure
  // needs the copy wanted first to be served first. Algorithm 1 read literally (its clock
  // restarting at each layer, so a copy hides behind the one layer before) gives A 27 and 33.
  assertEquals(table(stall), { A: [9, 12], B: [0, 0], C: [0, 2] });
});

Deno.test("figure 3: A is the best uniform placement, as the paper says", () => {
  // One layer fewer on the host (distance 4: layers 4 and 8) needs 72 blocks; one more (distance
  // 2: layers 2, 4, 6, 8) leaves one layer to hide each 9-block copy behind, not two.
  const uniform = (d: number) =>
    BLOCKS.step1.map((blocksPerLayer) => ({ distance: d, blocksPerLayer }));
  assertEquals(deviceBlocks(LAYERS, uniform(4)), 72);
  assertEquals(stall(uniform(2)), 24);
  const fitting = candidateDistances(LAYERS).filter((d) => feasible(uniform(d)));
  const best = Math.min(...fitting.map((d) => stall(uniform(d))));
  assertEquals([best, fitting.filter((d) => stall(uniform(d)) === best)], [9, [3]]);
});

Deno.test("figure 3: on one queue every copy is exposed, and the ranking still holds", () => {
  // Sluice's model (overlap 0): the step is 27 ms of compute plus every block copied. B < C < A at
  // Step 1 (B moves fewest blocks, as the paper says), and at Step 16, with B over the budget,
  // C < A: the same choices the paper's GPU makes, for a larger price.
  const copied = (b: Placed[]) => predictStepMs(costs, shape, b) - LAYERS * LAYER_MS;
  assertEquals(table(copied), { A: [27, 30], B: [18, 18], C: [24, 26] });
});

Deno.test("figure 3: with full overlap, Sluice's model hides a copy behind its own layer only", () => {
  // A departure from the paper's GPU, by design: Sluice's executor copies a layer's host KV just
  // before that layer runs, on the one queue, so overlap (when an adapter has any) can hide the
  // copy behind that layer's compute alone, where the paper's copy engine starts it as soon as
  // the request's previous host layer has computed. So at overlap 1 each host layer costs
  // max(3, its copy) and the stalls are A 18 → 21, B 9, C 9 → 11 units (paper: 9 → 12, 0, 0 → 2).
  const full = { ...costs, overlap: 1 };
  const exposed = (b: Placed[]) => predictStepMs(full, shape, b) - LAYERS * LAYER_MS;
  assertEquals(table(exposed), { A: [18, 21], B: [9, 9], C: [9, 11] });
});

Deno.test("figure 3: the planner matches B at Step 1 and picks C at Step 16", () => {
  // At Step 1 B ties with a placement the figure does not draw: Request 1 offloading 4 layers
  // (distance 2) and Request 2 only its last (distance 9) also copies 18 blocks and needs 69.
  for (const plan of [orbitPlan, bruteForcePlan]) {
    const early = plan(input(BLOCKS.step1)), late = plan(input(BLOCKS.step16));
    const tied = [[[1, 0], [2, 3]], [[1, 2], [2, 9]]].map((d) => JSON.stringify(d));
    assert(tied.includes(JSON.stringify([...early.distances])), `${[...early.distances]}`);
    assertEquals([...late.distances], [[1, 4], [2, 3]]);
    assertEquals([early.windowEndStepMs, late.windowEndStepMs], [27 + 18, 27 + 26]);
    assertEquals([early.deviceBlocks, late.deviceBlocks], [69, 70]);
  }
});

Deno.test("figure 3: Batch-Uniform (--orbit-plan batch) picks A, the request-wise planner B then C", () => {
  // Fig. 14a's first step: one distance for the whole batch. Of the uniform placements A is the
  // fastest that fits at both steps (the test above), so the batch planner takes it and pays its
  // 27 and 30 blocks of copies where the request-wise plans pay 18 and 26.
  for (const blocks of [BLOCKS.step1, BLOCKS.step16]) {
    const uniform = orbitPlan({ ...input(blocks), batchUniform: true });
    assertEquals([...uniform.distances], [[1, 3], [2, 3]]);
  }
  const u1 = orbitPlan({ ...input(BLOCKS.step1), batchUniform: true });
  const u16 = orbitPlan({ ...input(BLOCKS.step16), batchUniform: true });
  assertEquals([u1.windowEndStepMs, u16.windowEndStepMs], [27 + 27, 27 + 30]);
  const r1 = orbitPlan(input(BLOCKS.step1)), r16 = orbitPlan(input(BLOCKS.step16));
  assertEquals([r1.windowEndStepMs, r16.windowEndStepMs], [27 + 18, 27 + 26]);
});

Deno.test("figure 3: without Pause-Resume (serveAll), a batch the SLO cannot hold gets the fastest plan memory allows", () => {
  // A 20 ms TBT SLO: every placement that fits is late for both requests beyond the bound (one
  // late token per step), so OrbitFlow pauses Request 2 (the most KV) and runs Request 1 whole;
  // without Pause-Resume the planner serves both with B's (or its tie's) 18 blocks of copies.
  const tight = (blocks: number[]): PlanInput => {
    const i = input(blocks);
    return { ...i, requests: i.requests.map((r) => ({ ...r, tbtSloMs: 20 })) };
  };
  const paused = orbitPlan(tight(BLOCKS.step1));
  assertEquals([paused.pause, [...paused.distances]], [2, [[1, 0]]]);
  const all = orbitPlan({ ...tight(BLOCKS.step1), serveAll: true });
  assertEquals([all.pause, all.feasible, all.windowEndStepMs], [undefined, true, 27 + 18]);
  assertEquals([...all.distances.keys()], [1, 2]);
});
