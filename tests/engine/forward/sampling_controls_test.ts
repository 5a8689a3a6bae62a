// Token masks and penalty seeds through Engine.step on a generated model: the plan's masks reach
// the sampler (a masked row picks the best allowed id of the raw logits, the unmasked row beside it
// is untouched), and malformed masks or unseeded penalties are refused before anything runs.

import { Engine, type StepPlan } from "../../../engine/engine.ts";
import { writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import { assertEquals, assertThrows } from "../../helpers/testing.ts";
import { testGpu } from "../../helpers/gpu.ts";

Deno.test("engine: a step's token masks apply to their samples only; bad masks and unseeded penalties are refused", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-masks-" });
  try {
    await writeTinyModel(dir, {
      hiddenSize: 64,
      intermediateSize: 136,
      numLayers: 1,
      numHeads: 4,
      numKvHeads: 2,
      tied: true,
      dtype: "F32",
      seed: 3,
    });
    const engine = await Engine.load({ modelDir: dir, gpu: await testGpu(), skipWarmUp: true });
    const V = engine.info.vocabSize;
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    const tables = [0, 1].map((slot) => ({ slot, layer: 0, first: 0, blocks: [slot] }));
    const plan = (extra: Partial<StepPlan>): StepPlan => ({
      tables,
      sampling: [0, 1].map((slot) => ({ slot, params: greedy })),
      rows: [{ slot: 0, pos: 0, token: 5 }, { slot: 1, pos: 0, token: 9 }],
      samples: [{ row: 0 }, { row: 1 }],
      wantTopLogprobs: false,
      ...extra,
    });
    const free = await engine.step(plan({}));
    const raw = await engine.readLogits(2);
    // Allow every third id but the greedy one.
    const bits = new Uint32Array(Math.ceil(V / 32));
    for (let id = 0; id < V; id += 3) if (id !== free[1].id) bits[id >>> 5] |= 1 << (id & 31);
    const masked = await engine.step(plan({ masks: [{ sample: 1, bits }] }));
    let best = -1;
    for (let id = 0; id < V; id += 3) {
      if (id !== free[1].id && (best < 0 || raw[1][id] > raw[1][best])) best = id;
    }
    assertEquals(masked.map((r) => r.id), [free[0].id, best]);
    assertThrows(() => engine.step(plan({ masks: [{ sample: 2, bits }] })), /sample 2/);
    assertThrows(() => engine.step(plan({ masks: [{ sample: 0, bits: bits.slice(1) }] })), /words/);
    const penalized = [{ slot: 0, params: { ...greedy, presencePenalty: 1 } }];
    assertThrows(() => engine.step(plan({ sampling: penalized })), /penalty seed/);
    await engine.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
