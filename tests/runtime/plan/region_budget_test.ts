// OrbitFlow §3.3.1, Eq. 1: resident blocks plus one prefetch buffer fit the device. The region the
// pool reserves is that buffer, so the budget the planner works to is the device's blocks (less
// what requests outside the plan hold) minus the region, once: not minus the reservation and then
// minus the plan's own region again.

import { OrbitOffload } from "../../../runtime/plan/orbit_offload.ts";
import { ilpModel, orbitPlan } from "../../../runtime/plan/orbit_planner.ts";
import { offloadedCount } from "../../../runtime/kv/offload_pattern.ts";
import { evaluate, termsOf } from "../../../runtime/plan/plan_terms.ts";
import type { PlanInput } from "../../../runtime/plan/plan_types.ts";
import { costModelWithLayer } from "../../helpers/cost_models.ts";
import { recordingPlanSource } from "../../helpers/plan_source.ts";
import { stage, testRequest } from "../../helpers/requests.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

const LAYERS = 4;

const costs = () => costModelWithLayer(2, 0.3, { roundTripMs: 1 });

/** Two requests of 10 blocks a layer (80 blocks whole) on `budget` blocks. */
function input(budget: number, reserved?: number): PlanInput {
  return {
    requests: [10, 10].map((b, i) => ({
      id: i + 1,
      tokens: 40,
      blocksPerLayer: b,
      bufferedTokens: 0,
    })),
    numLayers: LAYERS,
    blockBytes: 4096,
    budgetBlocks: budget,
    prefetchRegionBlocks: 20,
    regionReservedBlocks: reserved,
    costs: costs(),
    window: 1,
    timeoutMs: 1000,
  };
}

Deno.test("region budget: the planner is shown the device's blocks and the reserved region apart", () => {
  const asked: PlanInput[] = [];
  const client = recordingPlanSource(asked);
  const orbit = new OrbitOffload({
    info: { numLayers: LAYERS, kvBlockBytes: 4096, blockSize: 4 },
    // Request 9 (prefilling, outside the plan) holds 12 blocks.
    pool: { total: 100, heldBy: (id) => id === 9 ? 12 : 0 },
    region: { regionBlocks: 20, regionTotal: 20 },
    costs,
    client,
  });
  const a = stage(testRequest(1, { ids: [1, 2, 3, 4, 5, 6], maxTokens: 40 }), "decoding", {
    computed: 20,
  });
  const b = stage(testRequest(9, { ids: [1, 2, 3, 4, 5, 6], maxTokens: 40 }), "prefilling");
  orbit.beforeStep([a, b]);
  assertEquals(asked.length, 1);
  assertEquals(asked[0].budgetBlocks, 100 - 12, "device blocks less the others'");
  assertEquals(asked[0].regionReservedBlocks, 20, "the region, subtracted by the planner once");
  // The ILP's memory row: what resident blocks may use is the budget less the region, once.
  const model = ilpModel(termsOf(asked[0]));
  assertEquals(model.constraints instanceof Map && model.constraints.get("mem"), { max: 68 });
  orbit.close();
});

Deno.test("region budget: a plan whose resident blocks fill the pool beside its region fits", () => {
  // Pool 80, region 20 reserved: 60 blocks for resident KV. Both requests at distance 4 (one
  // layer of four on the host) keep 60 and bring 20 (two requests × 10) into the region: it fits
  // exactly. Counted twice (60 less the plan's own 20) it would not, and more would be offloaded.
  const once = input(80, 20);
  const e = evaluate(termsOf(once), [4, 4]);
  assertEquals([e.deviceBlocks, e.prefetchBlocks, e.feasible], [80, 20, true]);
  const plan = orbitPlan(once);
  assert(plan.feasible);
  assertEquals(hostLayers(plan.distances), 2, "two layers of ten blocks leave: exactly the room");
  assertEquals(plan.deviceBlocks, 80);
  // The old reading: the reservation already taken off the budget, the plan's region on top.
  const twice = input(60);
  assertEquals(evaluate(termsOf(twice), [4, 4]).feasible, false);
  const worse = orbitPlan(twice);
  assert(worse.feasible && hostLayers(worse.distances) > 2, "counted twice, more is offloaded");
});

function hostLayers(distances: Map<number, number>): number {
  return [...distances.values()].reduce((n, d) => n + offloadedCount(d, LAYERS), 0);
}
