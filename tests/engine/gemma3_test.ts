// Gemma 3 end to end, as smollm3_phi3_test.ts runs SmolLM3 and Phi-3: a generated model written as
// a Hugging Face directory (F32 safetensors, on both dtype paths) and as GGUF (F32, F16, Q8_0 and
// llama.cpp's Q4_K_M mix), loaded through Engine.load like --model, each within a bound of the
// float64 reference at every prompt position and through a greedy decode, with the reference's
// greedy tokens.
//
// A shape where every option bites: 12 layers, so llama.cpp's fixed pattern makes layers 5 and 11
// global and the ten others local, with a window of 8 against a 22-token prompt; local RoPE base
// 10000 beside a global 1e6 with linear scaling (factor 8, global layers only); a head_dim of 128
// with 4 heads over a hidden size of 256 (o reads 512 values), one KV head; tied embeddings, scaled
// by √256 on the way in; GeGLU; q/k norms; the four norms of each layer, stored as w (safetensors)
// and as 1 + w (GGUF).
//
// Bounds as architectures_test.ts: f32 path 2e-4, f16 path 2e-2 of the largest |logit|.

import { Engine } from "../../engine/engine.ts";
import { openModelDir } from "../../engine/formats/open_model.ts";
import { readGguf } from "../../engine/formats/gguf.ts";
import { recipeType } from "../../engine/formats/gguf_recipes.ts";
import type { TinyModelSpec } from "../../engine/sources/tiny_model.ts";
import type { Gpu } from "../../engine/gpu/device.ts";
import { testGpu, testGpuF32 } from "../helpers/gpu.ts";
import { testSeed } from "../helpers/random.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { writeTinyGguf } from "../helpers/tiny_gguf.ts";
import { checkModel } from "../helpers/model_check.ts";

const WINDOW = 8;

const SPEC: Omit<TinyModelSpec, "seed"> = {
  architecture: "gemma3",
  hiddenSize: 256,
  intermediateSize: 256,
  numLayers: 12,
  numHeads: 4,
  numKvHeads: 1,
  headDim: 128,
  tied: true,
  dtype: "F32",
  slidingWindow: WINDOW,
  ropeTheta: 1_000_000,
  ropeScaling: { type: "linear", factor: 8 },
};

const BOUND = { f32: 2e-4, f16: 2e-2 };
const CHECK = { prompt: 22, generated: 4 };

Deno.test("Gemma 3 in both formats: logits and greedy tokens match the float64 reference", async (t) => {
  const seed = testSeed();
  const def = await testGpu();
  const f32 = await testGpuF32();
  const dir = await Deno.makeTempDir({ prefix: "sluice-gemma3-" });
  try {
    const spec = { ...SPEC, seed };
    const f32File = await writeTinyGguf(`${dir}/f32`, spec, { type: "F32" });
    const f16File = await writeTinyGguf(`${dir}/f16`, spec, { type: "F16" });
    const q8File = await writeTinyGguf(`${dir}/q8`, spec, { type: "Q8_0" });
    const recipeModel = {
      numLayers: spec.numLayers,
      gqa: spec.numHeads / spec.numKvHeads,
      tied: true,
    };
    const q4File = await writeTinyGguf(`${dir}/q4`, spec, {
      type: "F32",
      typeOf: (name, dims) => recipeType("q4_k_m", recipeModel, name, dims),
    });
    const gguf = await readGguf(q4File.path);
    assertEquals(gguf.metadata["general.architecture"], "gemma3");
    const types = new Set([...gguf.tensors.values()].map((x) => x.typeName));
    for (const type of ["Q4_K", "Q6_K"]) assert(types.has(type), `Q4_K_M: no ${type}`);
    for (const name of ["blk.0.post_attention_norm.weight", "blk.0.post_ffw_norm.weight"]) {
      assert(gguf.tensors.has(name), `gemma3 GGUF lacks ${name}`);
    }
    assert(!gguf.tensors.has("output.weight"), "tied: no output.weight");

    const source = await openModelDir(f32File.sourceDir);
    const cfg = source.config;
    assertEquals(cfg.architecture, "gemma3");
    assertEquals(cfg.localLayers?.layers.map((local) => local ? 1 : 0).join(""), "111110111110");
    assertEquals(cfg.localLayers?.window, WINDOW);
    assertEquals(cfg.activation, "gelu_tanh");
    assertEquals(cfg.normOffset, 1);
    assertEquals(cfg.embedScale, 16);
    const fromGguf = (await openModelDir(f32File.path)).config;
    assertEquals(fromGguf.normOffset, 0);
    assertEquals(fromGguf.localLayers, cfg.localLayers);
    assertEquals(fromGguf.ropeScaling, cfg.ropeScaling);
    assertEquals(fromGguf.attentionScale, cfg.attentionScale);

    const runs: { name: string; model: string; reference: string; gpu: Gpu }[] = [
      { name: "safetensors", model: f32File.sourceDir, reference: f32File.sourceDir, gpu: f32 },
      { name: "safetensors", model: f32File.sourceDir, reference: f32File.sourceDir, gpu: def },
      { name: "GGUF F32", model: f32File.path, reference: f32File.referenceDir, gpu: def },
      { name: "GGUF F16", model: f16File.path, reference: f16File.referenceDir, gpu: def },
      { name: "GGUF Q8_0", model: q8File.path, reference: q8File.referenceDir, gpu: def },
      { name: "GGUF Q4_K_M", model: q4File.path, reference: q4File.referenceDir, gpu: def },
    ];
    for (const run of runs) {
      const label = run.gpu.f16 ? "f16" : "f32";
      await t.step(`gemma3, ${run.name} (${label})`, async () => {
        const engine = await Engine.load({
          modelDir: run.model,
          gpu: run.gpu,
          // 12 layers of one 128-value KV head: f32 KV needs more than 1 MiB for the prompt.
          gpuKvMb: 4,
          maxSlots: 32,
          maxRows: 32,
          blockSize: 4,
          maxTopLogprobs: 1,
          ringSize: 2,
          skipWarmUp: true,
        });
        try {
          assertEquals(engine.info.architecture, "gemma3");
          const reference = await openModelDir(run.reference);
          await checkModel(
            engine,
            reference,
            BOUND[label],
            `gemma3 ${run.name} ${label} seed ${seed}`,
            CHECK,
          );
        } finally {
          await engine.close();
        }
      });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
