// SmolLM3 and Phi-3 end to end, as architectures_test.ts runs the other families: generated models
// written as a Hugging Face directory (F32 safetensors, on both dtype paths) and as GGUF (F32, F16,
// Q8_0 and llama.cpp's Q4_K_M mix), loaded through Engine.load like --model, each within a bound of
// the float64 reference at every prompt position and through a greedy decode, with the reference's
// greedy tokens.
//
// Shapes chosen so that every option bites: SmolLM3 with 8 layers skips RoPE on layers 3 and 7
// (llama.cpp's fixed interval of 4, which its GGUF files imply); Phi-3 with fused qkv_proj and
// gate_up_proj (attn_qkv and ffn_up in GGUF), partial rotary (24 of 32 values), a sliding window of
// 8 against a 22-token prompt, tied embeddings (as Phi-4-mini), and LongRoPE with an original
// context of 16 in a model served 64 positions: the long factors and the attention factor
// sqrt(1 + ln 4 / ln 16) apply, and the prompt runs past the switch point; served 16 positions
// (a KV pool that small), the short factors apply instead.
//
// Bounds as architectures_test.ts: f32 path 2e-4, f16 path 2e-2 of the largest |logit|.

import { Engine } from "../../engine/engine.ts";
import { openModelDir } from "../../engine/formats/open_model.ts";
import { readGguf } from "../../engine/formats/gguf.ts";
import { type GgufMix, recipeType } from "../../engine/formats/gguf_recipes.ts";
import type { Architecture } from "../../engine/model/config.ts";
import type { TinyModelSpec } from "../../engine/sources/tiny_model.ts";
import type { Gpu } from "../../engine/gpu/device.ts";
import { testGpu, testGpuF32 } from "../helpers/gpu.ts";
import { testSeed } from "../helpers/random.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { writeTinyGguf } from "../helpers/tiny_gguf.ts";
import { checkModel, withCheckEngine } from "../helpers/model_check.ts";

const WINDOW = 8;
const ORIGINAL_CONTEXT = 16;

/** LongRoPE factors: short near 1, long growing with the wavelength, as Phi-3's are. */
const HALF_ROTARY = 24;
const LONG_ROPE = {
  type: "longrope" as const,
  shortFactor: Array.from({ length: HALF_ROTARY }, (_, i) => 1 + 0.05 * i),
  longFactor: Array.from({ length: HALF_ROTARY }, (_, i) => 1 + 0.6 * i),
  originalMaxPositionEmbeddings: ORIGINAL_CONTEXT,
  attentionFactor: 0, // derived when the config is read back
};

const FAMILIES: { architecture: Architecture; spec: Omit<TinyModelSpec, "seed"> }[] = [
  {
    architecture: "smollm3",
    spec: {
      architecture: "smollm3",
      // Rows of 256 as Phi-3's below (whole K-quant blocks; the same matmul pipelines).
      hiddenSize: 256,
      intermediateSize: 256,
      numLayers: 8,
      numHeads: 4,
      numKvHeads: 2,
      headDim: 64,
      tied: true,
      dtype: "F32",
      noRopeLayerInterval: 4,
    },
  },
  {
    architecture: "phi3",
    spec: {
      architecture: "phi3",
      // Rows of 256: whole K-quant blocks, so Q4_K_M holds Q4_K, Q5_K (attn_qkv) and Q6_K.
      hiddenSize: 256,
      intermediateSize: 256,
      numLayers: 3,
      numHeads: 4,
      numKvHeads: 2,
      headDim: 64,
      tied: true,
      dtype: "F32",
      slidingWindow: WINDOW,
      partialRotaryFactor: 0.75,
      ropeScaling: LONG_ROPE,
      maxPositionEmbeddings: 64,
      originalMaxPositionEmbeddings: ORIGINAL_CONTEXT,
    },
  },
];

const BOUND = { f32: 2e-4, f16: 2e-2 };
const CHECK = { prompt: 22, generated: 4 };

Deno.test("SmolLM3 and Phi-3 in both formats: logits and greedy tokens match the float64 reference", async (t) => {
  const seed = testSeed();
  const def = await testGpu();
  const f32 = await testGpuF32();
  for (const family of FAMILIES) {
    const dir = await Deno.makeTempDir({ prefix: "sluice-arch34-" });
    try {
      const spec = { ...family.spec, seed };
      const f32File = await writeTinyGguf(`${dir}/f32`, spec, { type: "F32" });
      const f16File = await writeTinyGguf(`${dir}/f16`, spec, { type: "F16" });
      const q8File = await writeTinyGguf(`${dir}/q8`, spec, { type: "Q8_0" });
      const mix: GgufMix = "q4_k_m";
      const recipeModel = {
        numLayers: spec.numLayers,
        gqa: spec.numHeads / spec.numKvHeads,
        tied: spec.tied,
      };
      const q4File = await writeTinyGguf(`${dir}/q4`, spec, {
        type: "F32",
        typeOf: (name, dims) => recipeType(mix, recipeModel, name, dims),
      });
      const gguf = await readGguf(q4File.path);
      assertEquals(gguf.metadata["general.architecture"], family.architecture);
      const types = new Set([...gguf.tensors.values()].map((x) => x.typeName));
      for (const type of ["Q4_K", "Q6_K"]) {
        assert(types.has(type), `${family.architecture} Q4_K_M: no ${type}`);
      }
      if (family.architecture === "phi3") {
        // llama.cpp's layout: fused attn_qkv and ffn_up (gate + up), the LongRoPE factors.
        for (const name of ["blk.0.attn_qkv.weight", "rope_factors_long.weight"]) {
          assert(gguf.tensors.has(name), `phi3 GGUF lacks ${name}`);
        }
        assertEquals(gguf.tensors.get("blk.0.ffn_up.weight")!.dims, [256, 512]);
        assert(types.has("Q5_K"), "phi3 Q4_K_M: attn_qkv is not Q5_K");
        assert(!gguf.tensors.has("blk.0.ffn_gate.weight"));
        const source = await openModelDir(f32File.sourceDir);
        assertEquals(source.config.rotaryDim, 48);
        assertEquals(source.config.slidingWindow, WINDOW);
      } else {
        const source = await openModelDir(f32File.sourceDir);
        assertEquals(source.config.ropeLayers, [true, true, true, false, true, true, true, false]);
      }
      const runs: { name: string; model: string; reference: string; gpu: Gpu }[] = [
        { name: "safetensors", model: f32File.sourceDir, reference: f32File.sourceDir, gpu: f32 },
        { name: "safetensors", model: f32File.sourceDir, reference: f32File.sourceDir, gpu: def },
        { name: "GGUF F32", model: f32File.path, reference: f32File.referenceDir, gpu: def },
        { name: "GGUF F16", model: f16File.path, reference: f16File.referenceDir, gpu: def },
        { name: "GGUF Q8_0", model: q8File.path, reference: q8File.referenceDir, gpu: def },
        { name: "GGUF Q4_K_M", model: q4File.path, reference: q4File.referenceDir, gpu: def },
      ];
      if (family.architecture === "phi3") {
        // Served no further than the original context (a KV pool of 16 positions): the short
        // factors, as transformers uses them for every sequence this short; the attention factor
        // still applies.
        await t.step("phi3, safetensors, context within the original (short factors)", async () => {
          const engine = await Engine.load({
            modelDir: f32File.sourceDir,
            gpu: def,
            // 16 positions of K and V (2 heads of 64 f16 values) on 3 layers, and the block table.
            gpuKvMb: (ORIGINAL_CONTEXT * 3 * 2 * 2 * 64 * 2 + 3 * 16 * 16 * 4) / 2 ** 20,
            maxSlots: 16,
            maxRows: 16,
            blockSize: 4,
            maxTopLogprobs: 1,
            ringSize: 2,
            skipWarmUp: true,
          });
          try {
            assertEquals(engine.info.maxContext, ORIGINAL_CONTEXT);
            const reference = await openModelDir(f32File.sourceDir);
            await checkModel(engine, reference, BOUND.f16, `phi3 short seed ${seed}`, {
              prompt: 10,
              generated: 4,
              context: ORIGINAL_CONTEXT,
            });
          } finally {
            await engine.close();
          }
        });
      }
      for (const run of runs) {
        const label = run.gpu.f16 ? "f16" : "f32";
        await t.step(`${family.architecture}, ${run.name} (${label})`, async () => {
          await withCheckEngine({ modelDir: run.model, gpu: run.gpu }, async (engine) => {
            assertEquals(engine.info.architecture, family.architecture);
            const reference = await openModelDir(run.reference);
            if (family.architecture === "phi3") {
              assertEquals(engine.info.slidingWindow, WINDOW);
              // Served past the original context: LongRoPE's long factors.
              assert(engine.info.maxContext > ORIGINAL_CONTEXT);
              const scaling = reference.config.ropeScaling;
              assert(scaling?.type === "longrope");
              assert(Math.abs(scaling.attentionFactor - Math.sqrt(1.5)) < 1e-12);
            }
            await checkModel(
              engine,
              reference,
              BOUND[label],
              `${family.architecture} ${run.name} ${label} seed ${seed}`,
              CHECK,
            );
          });
        });
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});
