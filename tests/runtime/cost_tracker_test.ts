// The runtime re-fits the engine's cost model from measured step times: a model profiled on a
// faster day converges to the speed steps really take, the copy bandwidth too, and the loop feeds
// it every step.

import type { CostModel } from "../../engine/engine.ts";
import { predictStepMs } from "../../engine/kv/cost_model.ts";
import { CostTracker } from "../../runtime/cost_tracker.ts";
import { Runtime } from "../../runtime/service.ts";
import type { BuiltStep } from "../../runtime/step_builder.ts";
import { FakeEngine } from "../../sim/fake_engine.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { stage, testRequest } from "../helpers/requests.ts";
import { costModelWithLayer } from "../helpers/cost_models.ts";
import { recordingPlanSource } from "../helpers/plan_source.ts";
import { OrbitOffload } from "../../runtime/plan/orbit_offload.ts";
import type { PlanInput } from "../../runtime/plan/plan_types.ts";

function stepOf(rows: number, samples: number): BuiltStep {
  return {
    plan: {
      tables: [],
      sampling: [],
      rows: Array.from({ length: rows }, (_, pos) => ({ slot: 0, pos, token: 1 })),
      samples: Array.from({ length: samples }, (_, row) => ({ row })),
      wantTopLogprobs: false,
    },
    owners: [],
    landings: [],
  };
}

Deno.test("cost tracker: a model profiled twice too fast converges to the measured step times", () => {
  const truth = costModelWithLayer(4, 0.6); // the adapter today
  const tracker = new CostTracker(costModelWithLayer(2, 0.3), 0);
  const loads = [1, 3, 8, 16, 32, 5];
  const errorAt = () => {
    const m = tracker.current!;
    return Math.max(
      ...loads.map((rows) => {
        const load = { rows, samples: 1 };
        return Math.abs(predictStepMs(m, load) / predictStepMs(truth, load) - 1);
      }),
    );
  };
  const before = errorAt();
  for (let i = 0; i < 400; i++) {
    const rows = loads[i % loads.length];
    tracker.observe(stepOf(rows, 1), predictStepMs(truth, { rows, samples: 1 }));
  }
  const after = errorAt();
  assert(before > 0.4, `the stale model should start far off (${before})`);
  assert(after < 0.05, `re-fitted model still ${(after * 100).toFixed(1)}% off`);
  assert(tracker.observed === 400);
});

Deno.test("cost tracker: the runtime feeds it every delivered step", async () => {
  const engine = new FakeEngine({ maxSlots: 2 });
  (engine.info as { costModel?: CostModel }).costModel = costModelWithLayer(2, 0.3);
  const runtime = new Runtime(engine, {
    policy: "fcfs",
    maxQueue: 10,
    maxTokensLimit: 100,
    eosIds: [],
  });
  const h = runtime.submit({
    ids: [1, 2, 3],
    maxTokens: 5,
    sampling: { temperature: 0, topK: 0, topP: 1, seed: 0 },
  });
  for await (const _ of h.tokens);
  await runtime.close();
  assert(runtime.costs.observed >= 5, `only ${runtime.costs.observed} steps observed`);
  assert(runtime.costs.current !== engine.info.costModel, "the model was never re-fitted");
});

/** A decode step of `rows` rows that prefetches `blocks` blocks (one run: two copies). */
function prefetchStep(rows: number, blocks: number): BuiltStep {
  const step = stepOf(rows, rows);
  const run = Array.from({ length: blocks }, (_, i) => i);
  step.plan.prefetch = [{ layer: 1, deviceBlocks: run, hostBlocks: run }];
  return step;
}

Deno.test("cost tracker: prefetch bandwidth is re-fitted toward measured copy times (OrbitFlow §3.4)", () => {
  const BLOCK_BYTES = 1 << 16;
  const profiled = {
    ...costModelWithLayer(2, 0.3),
    prefetch: { fixedMs: 0.02, perUnitMs: 1 / 3e6 },
  };
  // Today the link is 3× slower than profiled; compute is as profiled.
  const truth = { ...profiled, prefetch: { fixedMs: 0.02, perUnitMs: 3 / 3e6 } };
  const tracker = new CostTracker(profiled, BLOCK_BYTES);
  const load = (step: BuiltStep) => tracker.loadOf(step);
  const seen: number[] = [];
  for (let i = 0; i < 120; i++) {
    const step = prefetchStep(1 + (i % 4), 8 + (i % 3) * 8);
    tracker.observe(step, predictStepMs(truth, load(step)));
    seen.push(tracker.current!.prefetch!.perUnitMs);
  }
  const want = truth.prefetch.perUnitMs;
  const off = (x: number) => Math.abs(x / want - 1);
  assert(off(profiled.prefetch.perUnitMs) > 0.6);
  assert(off(seen[9]) < off(seen[0]), "moves toward the measured time from the first steps");
  assert(off(seen.at(-1)!) < 0.1, `bandwidth still ${(off(seen.at(-1)!) * 100).toFixed(0)}% off`);
  assertEquals(tracker.current!.prefetch!.fixedMs, 0.02, "per-copy cost stays as profiled");
  assertEquals(tracker.current!.hostToDevice, profiled.hostToDevice, "lines the steps never used");
});

Deno.test("cost tracker: the orbit planner is given the re-fitted bandwidth", () => {
  const profiled = {
    ...costModelWithLayer(2, 0.3),
    prefetch: { fixedMs: 0.02, perUnitMs: 1 / 3e6 },
  };
  const tracker = new CostTracker(profiled, 1 << 16);
  const asked: PlanInput[] = [];
  const orbit = new OrbitOffload({
    info: { numLayers: 4, kvBlockBytes: 1 << 16, blockSize: 4 },
    pool: { total: 100, heldBy: () => 0 },
    region: { regionBlocks: 10, regionTotal: 10 },
    costs: () => tracker.current,
    client: recordingPlanSource(asked),
  });
  for (let i = 0; i < 20; i++) tracker.observe(prefetchStep(2, 16), 200);
  const req = stage(testRequest(1, { ids: [1, 2, 3], maxTokens: 8 }), "decoding", { computed: 5 });
  orbit.beforeStep([req]);
  const given = asked[0].costs.prefetch!.perUnitMs;
  assertEquals(given, tracker.current!.prefetch!.perUnitMs);
  assert(given > 2 * profiled.prefetch.perUnitMs, `slow copies measured, ${given} planned with`);
  orbit.close();
});
