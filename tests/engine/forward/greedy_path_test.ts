// The forward pass's choice of sampler: a step whose rows are all greedy (and want no top logprobs)
// takes the greedy sampler (one more dispatch: its argmax is spread over workgroups), any other
// step the full one, and a greedy row's record is the same bit for bit either way.

import { Engine, type StepPlan } from "../../../engine/engine.ts";
import { writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import { assertEquals } from "../../helpers/testing.ts";
import { testGpu } from "../../helpers/gpu.ts";

/** Counts compute dispatches recorded while `f` runs. */
async function countDispatches<T>(f: () => Promise<T>): Promise<[T, number]> {
  const proto = GPUComputePassEncoder.prototype;
  const original = proto.dispatchWorkgroups;
  let n = 0;
  proto.dispatchWorkgroups = function (this: GPUComputePassEncoder, ...args) {
    n++;
    return original.apply(this, args);
  };
  try {
    return [await f(), n];
  } finally {
    proto.dispatchWorkgroups = original;
  }
}

const f32Bits = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0];

Deno.test("a greedy row's record is the same whichever sampler its step takes", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-greedy-path-" });
  try {
    await writeTinyModel(dir, {
      hiddenSize: 64,
      intermediateSize: 136,
      numLayers: 1,
      numHeads: 4,
      numKvHeads: 2,
      tied: true,
      dtype: "F32",
      // An odd vocabulary, so rows straddle vec4s.
      vocabSize: 1001,
      seed: 5,
    });
    const engine = await Engine.load({ modelDir: dir, gpu: await testGpu(), skipWarmUp: true });
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    const sampled = { temperature: 1, topK: 0, topP: 1, seed: 7 };
    const tables = [0, 1].map((slot) => ({ slot, layer: 0, first: 0, blocks: [slot] }));
    const step = (slots: number[], params: (typeof greedy)[], wantTopLogprobs = false) =>
      countDispatches(() =>
        engine.step(
          {
            tables,
            sampling: slots.map((slot, i) => ({ slot, params: params[i] })),
            rows: slots.map((slot) => ({ slot, pos: 0, token: 5 + slot })),
            samples: slots.map((_, row) => ({ row })),
            wantTopLogprobs,
          } satisfies StepPlan,
        )
      );
    // Slot 0 greedy beside a sampled slot 1: the full sampler.
    const [mixed, mixedDispatches] = await step([0, 1], [greedy, sampled]);
    // Slot 0 alone, then both greedy: the greedy sampler, one dispatch more.
    const [alone, aloneDispatches] = await step([0], [greedy]);
    const [both, bothDispatches] = await step([0, 1], [greedy, greedy]);
    const logits = await engine.readLogits(2);
    assertEquals(aloneDispatches, mixedDispatches + 1, "greedy alone takes the greedy sampler");
    assertEquals(bothDispatches, mixedDispatches + 1, "all greedy takes the greedy sampler");
    // Top logprobs asked: the full sampler, greedy rows or not.
    const [top, topDispatches] = await step([0], [greedy], true);
    assertEquals(topDispatches, mixedDispatches);
    for (const r of [alone[0], both[0], top[0]]) {
      assertEquals(r.id, mixed[0].id);
      assertEquals(f32Bits(r.logprob), f32Bits(mixed[0].logprob), "logprob bits");
    }
    // Slot 1's greedy id is its logits' argmax (lowest id on ties).
    let best = 0;
    for (let id = 1; id < logits[1].length; id++) if (logits[1][id] > logits[1][best]) best = id;
    assertEquals(both[1].id, best);
    await engine.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
