// OrbitFlow §3.3.1's self-determined decode window: the planner, not a constant, says how many
// steps a plan holds. The same batch gets the longest window when memory and SLO margin are ample,
// a shorter one when its KV's growth would force offloading within it, and one bounded by how many
// steps its deposited tokens cover under a tight SLO; the offload driver re-plans at the window
// the planner chose.

import { orbitPlan } from "../../../runtime/plan/orbit_planner.ts";
import { OrbitOffload } from "../../../runtime/plan/orbit_offload.ts";
import { windowChoices } from "../../../runtime/plan/plan_batch.ts";
import type { PlanInput, PlanRequest } from "../../../runtime/plan/plan_types.ts";
import { costModelWithLayer } from "../../helpers/cost_models.ts";
import { stage, testRequest } from "../../helpers/requests.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

const LAYERS = 4, BLOCK = 4;

// Slow copies: a prefetched layer costs the step visibly (~2 ms for 14 blocks).
const costs = () =>
  costModelWithLayer(2, 0.3, {
    roundTripMs: 1,
    hostToDevice: { fixedMs: 0.02, perUnitMs: 1 / 3e4 },
    deviceToHost: { fixedMs: 0.01, perUnitMs: 1 / 2e4 },
  });

/** Two requests at 40 tokens (10 blocks a layer) going on to 200. */
function input(budget: number, extra: Partial<PlanRequest> = {}, maxViolationsPerStep = 1) {
  const requests = [1, 2].map((id) => ({
    id,
    tokens: 40,
    blocksPerLayer: 10,
    finalTokens: 200,
    bufferedTokens: 0,
    ...extra,
  }));
  return {
    requests,
    numLayers: LAYERS,
    blockBytes: 4096,
    blockTokens: BLOCK,
    budgetBlocks: budget,
    prefetchRegionBlocks: 40,
    costs: costs(),
    window: 4,
    maxWindow: 64,
    timeoutMs: 5000,
    maxViolationsPerStep,
    optimalityGap: 0,
  } satisfies PlanInput;
}

Deno.test("window: Δ_min doubling up to the cap", () => {
  assertEquals(windowChoices(4, 64), [4, 8, 16, 32, 64]);
  assertEquals(windowChoices(16, 100), [16, 32, 64, 100]);
  assertEquals(windowChoices(16), [16]);
  assertEquals(windowChoices(16, 16), [16]);
});

Deno.test("window: the planner picks the window from the batch's memory and SLO margin", () => {
  // Ample memory, no SLO: the plan holds to the cap.
  const ample = orbitPlan(input(10_000));
  assertEquals([ample.status, ample.window], ["all-resident", 64]);

  // 100 blocks: both keep every layer while ceil((40 + Δ) / 4) ≤ 12, i.e. for 8 steps; a longer
  // window would have to offload from the start, slowing every step: the window is 8.
  const tight = orbitPlan(input(100));
  assertEquals([tight.status, tight.window], ["all-resident", 8]);
  assert(tight.feasible);

  // Ample memory but a TBT SLO just under the step (~11 ms): with no late token allowed, the plan
  // holds only as long as the deposit covers the shortfall, ~0.1 token a step.
  const step = ample.predictedStepMs;
  const slo = { tbtSloMs: step / 1.1 };
  const some = orbitPlan(input(10_000, { ...slo, bufferedTokens: 2 }, 0));
  assertEquals([some.feasible, some.window], [true, 16]);
  const few = orbitPlan(input(10_000, { ...slo, bufferedTokens: 0.5 }, 0));
  assertEquals([few.feasible, few.window], [true, 4]);
});

Deno.test("window: the offload driver re-plans when the planner's chosen window runs out", async () => {
  const asked: PlanInput[] = [];
  let plan: ReturnType<typeof orbitPlan> | undefined;
  let seq = 0;
  const orbit = new OrbitOffload({
    info: { numLayers: LAYERS, kvBlockBytes: 4096, blockSize: BLOCK },
    pool: { total: 100, heldBy: () => 0 },
    region: { regionBlocks: 10, regionTotal: 10 },
    costs,
    window: 4,
    maxWindow: 64,
    client: {
      request: (i: PlanInput) => {
        asked.push(i);
        plan = orbitPlan(i);
        return ++seq;
      },
      latest: () => plan,
      get latestSeq() {
        return seq;
      },
      busy: false,
      settled: () => Promise.resolve("planned"),
      close: () => {},
      abandoned: 0,
      failed: 0,
    },
  });
  // One request of 40 tokens on 100 blocks less a 10-block region: 90 blocks hold 22 blocks a
  // layer, so keeping every layer lasts until 88 tokens, 48 steps: the planner's window is 32.
  const req = stage(testRequest(1, { ids: [1, 2, 3, 4], maxTokens: 196 }), "decoding", {
    computed: 40,
  });
  orbit.beforeStep([req]);
  await null;
  assertEquals([asked.length, asked[0].window, asked[0].maxWindow], [1, 4, 64]);
  assertEquals(plan!.window, 32);
  // In force from step 2. A fixed window of 4 would ask again at step 4; the chosen one holds
  // until step 33, so the next plan is asked for at step 32 (its solve runs during one step).
  for (let s = 2; s < 32; s++) orbit.beforeStep([req]);
  assertEquals(asked.length, 1);
  orbit.beforeStep([req]);
  assertEquals(asked.length, 2, "asked again as the chosen window ends");
  assertEquals(orbit.stats().requested.window, 1);
  orbit.close();
});
