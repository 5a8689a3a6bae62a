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

import { openModelDir } from "../../engine/formats/open_model.ts";
import { readGguf } from "../../engine/formats/gguf.ts";
import type { TinyModelSpec } from "../../engine/sources/tiny_model.ts";
import { testGpu, testGpuF32 } from "../helpers/gpu.ts";
import { testSeed } from "../helpers/random.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { formatRuns, writeTinyGgufSet } from "../helpers/tiny_gguf.ts";
import { checkModel, withCheckEngine } from "../helpers/model_check.ts";

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
    const files = await writeTinyGgufSet(dir, spec);
    const f32File = files.f32;
    const gguf = await readGguf(files.q4km.path);
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

    const runs = formatRuns(files, { f32, default: def });
    for (const run of runs) {
      const label = run.gpu.f16 ? "f16" : "f32";
      await t.step(`gemma3, ${run.name} (${label})`, async () => {
        // 12 layers of one 128-value KV head: f32 KV needs more than 1 MiB for the prompt.
        await withCheckEngine({ modelDir: run.model, gpu: run.gpu, gpuKvMb: 4 }, async (engine) => {
          assertEquals(engine.info.architecture, "gemma3");
          const reference = await openModelDir(run.reference);
          await checkModel(
            engine,
            reference,
            BOUND[label],
            `gemma3 ${run.name} ${label} seed ${seed}`,
            CHECK,
          );
        });
      });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
