// Every supported family end to end, in both formats: a tiny Llama, Qwen2, Qwen3 and Mistral (a
// window of 8, smaller than the 22-token prompt, so that it bites) written as a Hugging Face
// directory and as GGUF (F32, F16 and Q8_0 matrices), loaded through Engine.load like --model. Each
// gives logits within a bound of the float64 reference over the values its file holds, at every
// prompt position and through a greedy decode, and the reference's greedy tokens. Qwen2, Qwen3 and
// Mistral also run as llama.cpp's K-quant mixes (Q4_K_M, and IQ4_XS or Q5_K_M by
// engine/formats/gguf_recipes.ts) at a hidden size of 160, not whole 256-value blocks, so that
// the fallback types (Q5_0, Q8_0, IQ4_NL, Q5_1) sit beside the K-quants, fused q/k/v mixing types.
//
// Bounds, relative to the largest |logit|, as in model_logits_test.ts: f32 path 2e-4 (summation
// order only), f16 path 2e-2 (f16 weights and KV through 2 layers). The reference holds the
// quantized files' values exactly, so the mixes keep the same bounds.

import { openModelDir } from "../../engine/formats/open_model.ts";
import { type GgmlTypeName, readGguf } from "../../engine/formats/gguf.ts";
import { type GgufMix, recipeType } from "../../engine/formats/gguf_recipes.ts";
import { readTensorF64 } from "../../engine/formats/safetensors.ts";
import type { Architecture } from "../../engine/model/config.ts";
import type { TinyModelSpec } from "../../engine/sources/tiny_model.ts";
import type { Gpu } from "../../engine/gpu/device.ts";
import { testGpu, testGpuF32 } from "../helpers/gpu.ts";
import { testSeed } from "../helpers/random.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { writeTinyGguf } from "../helpers/tiny_gguf.ts";
import { checkModel, withCheckEngine } from "../helpers/model_check.ts";

const BASE = {
  hiddenSize: 64,
  // Every matrix's columns (64, 4 × 16 or 4 × 24, 128) are whole Q8_0 blocks of 32.
  intermediateSize: 128,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 16,
  tied: true,
  dtype: "F32",
} as const;

const WINDOW = 8;
const FAMILIES: { architecture: Architecture; spec: Omit<TinyModelSpec, "seed">; gguf: string }[] =
  [
    { architecture: "llama", spec: BASE, gguf: "llama" },
    { architecture: "qwen2", spec: { ...BASE, architecture: "qwen2", tied: false }, gguf: "qwen2" },
    { architecture: "qwen3", spec: { ...BASE, architecture: "qwen3", headDim: 24 }, gguf: "qwen3" },
    {
      architecture: "mistral",
      spec: { ...BASE, architecture: "mistral", slidingWindow: WINDOW },
      gguf: "llama", // as llama.cpp writes Mistral, with llama.attention.sliding_window
    },
  ];

/**
 * The mixes' shape: rows of 160 (hidden) take llama.cpp's 32-value fallbacks; the 256-wide rows of
 * attn_output (4 heads × 64) and ffn_down keep the K-quant or IQ4_XS main type. One KV head (GQA
 * 4) gives IQ4_XS's Q5_K attn_v, which falls back to Q5_1.
 */
const NARROW = {
  hiddenSize: 160,
  intermediateSize: 256,
  numHeads: 4,
  numKvHeads: 1,
  headDim: 64,
} as const;

/** The types each mix's file must hold at NARROW, so that a drifting recipe can't test less. */
const HOLDS: Partial<Record<GgufMix, GgmlTypeName[]>> = {
  q4_k_m: ["Q4_K", "Q6_K", "Q5_0", "Q8_0"],
  q5_k_m: ["Q5_K", "Q6_K", "Q5_1", "Q8_0"],
  iq4_xs: ["IQ4_XS", "IQ4_NL", "Q5_1", "Q8_0"],
};

/** Each family's mixes: Q4_K_M for all, and IQ4_XS or Q5_K_M. */
const MIXES: { architecture: Architecture; mixes: GgufMix[] }[] = [
  { architecture: "qwen2", mixes: ["q4_k_m", "iq4_xs"] },
  { architecture: "qwen3", mixes: ["q4_k_m", "q5_k_m"] },
  { architecture: "mistral", mixes: ["q4_k_m", "iq4_xs"] },
];

const BOUND = { f32: 2e-4, f16: 2e-2 };
const PROMPT = 22;
const GENERATED = 6;

Deno.test("each family in both formats: logits and greedy tokens match the float64 reference", async (t) => {
  const seed = testSeed();
  const def = await testGpu();
  const f32 = await testGpuF32();
  for (const family of FAMILIES) {
    const dir = await Deno.makeTempDir({ prefix: "sluice-arch-" });
    try {
      const f16File = await writeTinyGguf(`${dir}/f16`, { ...family.spec, seed }, { type: "F16" });
      const f32File = await writeTinyGguf(`${dir}/f32`, { ...family.spec, seed }, { type: "F32" });
      const q8File = await writeTinyGguf(`${dir}/q8`, { ...family.spec, seed }, { type: "Q8_0" });
      const gguf = await readGguf(f32File.path);
      assertEquals(gguf.metadata["general.architecture"], family.gguf);
      await t.step(`${family.architecture}: GGUF q rows in llama.cpp's order`, async () => {
        // llama-arch files hold attn_q permuted for interleaved RoPE; qwen2 and qwen3 files use
        // NEOX (rotate-half) RoPE and keep Hugging Face's rows.
        const source = await openModelDir(f32File.sourceDir);
        const hf = await readTensorF64(
          source.tensors.get("model.layers.0.self_attn.q_proj.weight")!,
        );
        const t = gguf.tensors.get("blk.0.attn_q.weight")!;
        const stored = await readTensorF64({ ...t, dtype: "F32", shape: [...t.dims].reverse() });
        const same = hf.every((v, i) => v === stored[i]);
        assertEquals(same, family.gguf !== "llama", "rows kept as Hugging Face's");
      });
      const runs: { name: string; model: string; reference: string; gpu: Gpu }[] = [
        // The source directory holds F32 safetensors: both dtype paths load it.
        { name: "safetensors", model: f32File.sourceDir, reference: f32File.sourceDir, gpu: f32 },
        { name: "safetensors", model: f32File.sourceDir, reference: f32File.sourceDir, gpu: def },
        { name: "GGUF F32", model: f32File.path, reference: f32File.referenceDir, gpu: def },
        { name: "GGUF F16", model: f16File.path, reference: f16File.referenceDir, gpu: def },
        // Quantized matrices beside the float biases and norms.
        { name: "GGUF Q8_0", model: q8File.path, reference: q8File.referenceDir, gpu: def },
      ];
      const mixes = MIXES.find((m) => m.architecture === family.architecture)?.mixes ?? [];
      for (const mix of mixes) {
        const spec = { ...family.spec, ...NARROW };
        const recipeModel = {
          numLayers: spec.numLayers,
          gqa: spec.numHeads / spec.numKvHeads,
          tied: spec.tied,
        };
        const file = await writeTinyGguf(`${dir}/${mix}`, { ...spec, seed }, {
          type: "F32",
          typeOf: (name, dims) => recipeType(mix, recipeModel, name, dims),
        });
        const held = new Set(
          [...(await readGguf(file.path)).tensors.values()].map((t) => t.typeName),
        );
        for (const type of HOLDS[mix]!) {
          assert(held.has(type), `${family.architecture} ${mix}: no ${type}`);
        }
        runs.push({
          name: `GGUF ${mix}`,
          model: file.path,
          reference: file.referenceDir,
          gpu: def,
        });
      }
      for (const run of runs) {
        const label = run.gpu.f16 ? "f16" : "f32";
        await t.step(`${family.architecture}, ${run.name} (${label})`, async () => {
          await withCheckEngine({ modelDir: run.model, gpu: run.gpu }, async (engine) => {
            assertEquals(engine.info.architecture, family.architecture);
            assertEquals(
              engine.info.slidingWindow,
              family.architecture === "mistral" ? WINDOW : null,
            );
            const reference = await openModelDir(run.reference);
            await checkModel(engine, reference, BOUND[label], `${run.name} ${label} seed ${seed}`, {
              prompt: PROMPT,
              generated: GENERATED,
            });
          });
        });
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});
