// Whole models with their float weights in textures (--matmul-kernel texture) against the same
// models in storage buffers: every matrix really is in a texture, and greedy decoding gives the same
// tokens and the same logits, bit for bit, on both dtype paths, for a tied embedding (the LM head's
// texture is also the embedding table) and an untied one, at one decode row and at sixteen.
// The storage path itself is checked against the float64 reference in model_logits_test.ts. And
// the engine loads as --matmul-kernel says (auto times the model's own formats, GGUF blocks too);
// and quantized GGUF models, moved into textures once loaded, decode alike.

import { writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import type { ModelWeights } from "../../../engine/weights/model_weights.ts";
import type { WeightLayout } from "../../../engine/gpu/weight_texture.ts";
import type { Gpu } from "../../../engine/gpu/device.ts";
import { Engine } from "../../../engine/engine.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { testGpu, testGpus } from "../../helpers/gpu.ts";
import { writeTinyGguf } from "../../helpers/tiny_gguf.ts";
import { testSeed } from "../../helpers/random.ts";
import { greedyDecode, type GreedyRun, tinyForward } from "../../helpers/tiny_forward.ts";

const SLOTS = 16;
const PROMPT = 7;
const DECODE_STEPS = 5;

/** Every matrix's parts, so a test can see where each lives. */
function matrices(w: ModelWeights) {
  return [w.embed, w.lmHead, ...w.layers.flatMap((l) => [l.qkv, l.o, l.gateUp, l.down])];
}

/**
 * `batch` requests (slots 0..batch-1) prefill PROMPT tokens each in one step, then decode
 * DECODE_STEPS steps together (greedyDecode), with the weights in `layout`.
 */
async function greedy(
  gpu: Gpu,
  dir: string,
  layout: WeightLayout,
  batch: number,
  seed: number,
): Promise<GreedyRun> {
  const tf = await tinyForward(gpu, dir, {
    maxSlots: SLOTS,
    maxRows: SLOTS * PROMPT,
    maxTopLogprobs: 5,
    layout,
  });
  try {
    for (const m of matrices(tf.engine.weights)) {
      for (const p of m.parts) {
        assert(layout === "texture" ? p.texture && !p.buffer : p.buffer && !p.texture, layout);
      }
    }
    return await greedyDecode(tf, { batch, prompt: PROMPT, decode: DECODE_STEPS, seed });
  } finally {
    await tf.destroy();
  }
}

for (const tied of [true, false]) {
  Deno.test(`texture weights give the storage weights' tokens and logits (tied=${tied})`, async (t) => {
    const seed = testSeed();
    const dir = await Deno.makeTempDir({ prefix: "sluice-texture-" });
    try {
      await writeTinyModel(dir, {
        hiddenSize: 64,
        intermediateSize: 136,
        numLayers: 2,
        numHeads: 4,
        numKvHeads: 2,
        tied,
        dtype: "F32",
        seed,
      });
      for (const { label, gpu } of await testGpus()) {
        for (const batch of [1, SLOTS]) {
          await t.step(`${label}, ${batch} decode rows`, async () => {
            const storage = await greedy(gpu, dir, "storage", batch, seed + 1);
            const texture = await greedy(gpu, dir, "texture", batch, seed + 1);
            const what = `${label} batch ${batch} seed ${seed}`;
            assertEquals(texture.tokens, storage.tokens, `${what}: tokens differ`);
            assertEquals(texture.logits.length, batch * (DECODE_STEPS + 1));
            texture.logits.forEach((bits, i) =>
              assertEquals(bits, storage.logits[i], `${what}: logits of sample ${i} differ`)
            );
            // NaN never passes: the logits compared are finite.
            assert(
              storage.logits.every((b) => new Float32Array(b.buffer).every(Number.isFinite)),
              what,
            );
          });
        }
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

for (const type of ["Q8_0", "Q4_0"] as const) {
  Deno.test(`a ${type} GGUF from textures gives the storage tokens and logits`, async (t) => {
    const gpu = await testGpu();
    const seed = testSeed();
    const dir = await Deno.makeTempDir({ prefix: "sluice-texture-gguf-" });
    try {
      const gguf = await writeTinyGguf(dir, {
        hiddenSize: 64,
        intermediateSize: 128, // whole blocks of 32
        numLayers: 2,
        numHeads: 4,
        numKvHeads: 2,
        tied: true,
        dtype: "F32",
        seed,
      }, { type });
      for (const batch of [1, SLOTS]) {
        await t.step(`${batch} decode rows`, async () => {
          const storage = await greedy(gpu, gguf.path, "storage", batch, seed + 1);
          const texture = await greedy(gpu, gguf.path, "texture", batch, seed + 1);
          const what = `${type} batch ${batch} seed ${seed}`;
          assertEquals(texture.tokens, storage.tokens, `${what}: tokens differ`);
          texture.logits.forEach((bits, i) =>
            assertEquals(bits, storage.logits[i], `${what}: logits of sample ${i} differ`)
          );
          assert(
            storage.logits.every((b) => new Float32Array(b.buffer).every(Number.isFinite)),
            what,
          );
        });
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("the engine puts weights where --matmul-kernel says, or auto measured", async () => {
  const gpu = await testGpu();
  const dir = await Deno.makeTempDir({ prefix: "sluice-texture-engine-" });
  // auto's choice is cached under $SLUICE_CACHE: a fresh one, so it measures here.
  const cache = Deno.env.get("SLUICE_CACHE");
  Deno.env.set("SLUICE_CACHE", `${dir}/cache`);
  const spec = {
    hiddenSize: 64,
    intermediateSize: 128, // whole Q8_0 blocks
    numLayers: 2,
    numHeads: 4,
    numKvHeads: 2,
    tied: true,
    dtype: "F32",
    seed: testSeed(),
  } as const;
  try {
    await writeTinyModel(`${dir}/st`, spec);
    const gguf = await writeTinyGguf(`${dir}/gguf`, spec, { type: "Q8_0" });
    const cases = [
      { modelDir: `${dir}/st`, flag: undefined, want: "storage" },
      { modelDir: `${dir}/st`, flag: "texture", want: "texture" },
      { modelDir: gguf.path, flag: "auto", want: "measured" },
      { modelDir: gguf.path, flag: "texture", want: "texture" },
      { modelDir: `${dir}/st`, flag: "auto", want: "measured" },
    ] as const;
    for (const { modelDir, flag, want } of cases) {
      const engine = await Engine.load({
        modelDir,
        gpu,
        matmulKernel: flag,
        gpuKvMb: 1,
        maxSlots: 2,
        maxRows: 8,
        skipWarmUp: true,
      });
      try {
        const choice = engine.info.matmulKernel!;
        assertEquals(want === "measured" ? choice.source : choice.layout, want, modelDir);
        // One greedy step runs on whichever layout it is.
        const records = await engine.step({
          tables: [],
          sampling: [{ slot: 0, params: { temperature: 0, topK: 0, topP: 1, seed: 0 } }],
          rows: [{ slot: 0, pos: 0, token: 1 }],
          samples: [{ row: 0 }],
          wantTopLogprobs: false,
        });
        assertEquals(records.length, 1);
      } finally {
        await engine.close();
      }
    }
  } finally {
    if (cache === undefined) Deno.env.delete("SLUICE_CACHE");
    else Deno.env.set("SLUICE_CACHE", cache);
    await Deno.remove(dir, { recursive: true });
  }
});
