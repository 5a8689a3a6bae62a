// Whole GGUF models on the GPU: a tiny Llama written as GGUF with every matrix in one type (every
// type Sluice loads), and mixes as llama.cpp writes them (Q4_K_M, Q3_K_M, and Q4_K_M with rows of
// 160 values in its fallback types, whose fused qkv holds two types), loaded through Engine.load
// like --model x.gguf, gives logits within a bound of the float64 reference run over the weights
// the file holds (dequantized, rows un-permuted), and the reference's greedy tokens.

import { openModelDir } from "../../engine/formats/open_model.ts";
import type { TinyModelSpec } from "../../engine/sources/tiny_model.ts";
import type { Gpu } from "../../engine/gpu/device.ts";
import { testGpu, testGpuF32 } from "../helpers/gpu.ts";
import { testSeed } from "../helpers/random.ts";
import { assert } from "../helpers/testing.ts";
import { type GgmlTypeName as GgufWeightType, readGguf } from "../../engine/formats/gguf.ts";
import { type GgufMix, recipeType } from "../../engine/formats/gguf_recipes.ts";
import { writeTinyGguf } from "../helpers/tiny_gguf.ts";
import { checkModel, withCheckEngine } from "../helpers/model_check.ts";

// K-quants need rows of whole 256-value blocks: hidden, heads × headDim and intermediate are.
const SPEC: Omit<TinyModelSpec, "seed"> = {
  hiddenSize: 256,
  intermediateSize: 512,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 64,
  tied: true,
  dtype: "F32",
};

/**
 * Rows that are not whole 256-value blocks (hidden 160, as SmolLM2's 576): llama.cpp's Q4_K_M
 * writes them in its fallbacks, Q5_0 for Q4_K (q, k, v, o, gate, up, token_embd) and Q8_0 for
 * Q6_K (layer 1's attn_v beside Q5_0 q and k, and the output), while ffn_down's 512-value rows
 * stay Q4_K, or Q6_K in layer 1.
 */
const NARROW: Omit<TinyModelSpec, "seed"> = {
  hiddenSize: 160,
  intermediateSize: 512,
  numLayers: 2,
  numHeads: 5,
  numKvHeads: 1,
  headDim: 32,
  tied: false,
  dtype: "F32",
};

/** Q4_K_M's recipe in small: Q4_K, with attn_v and ffn_down of layer 0 and the output Q6_K. */
const q4kmMix = (name: string): GgufWeightType | undefined =>
  /^blk\.0\.(attn_v|ffn_down)|^output\./.test(name) ? "Q6_K" : undefined;

/** llama.cpp's own choices for a mix (engine/formats/gguf_recipes.ts) on a model of `spec`. */
const recipe =
  (mix: GgufMix, spec: Omit<TinyModelSpec, "seed">) => (name: string, dims: number[]) =>
    recipeType(
      mix,
      { numLayers: spec.numLayers, gqa: spec.numHeads / spec.numKvHeads, tied: spec.tied },
      name,
      dims,
    );

interface Case {
  name: string;
  type: GgufWeightType;
  untied?: boolean;
  typeOf?: (name: string, dims: number[]) => GgufWeightType | undefined;
  spec?: Omit<TinyModelSpec, "seed">;
  /** Tensor types the file must hold, so a recipe that drifts cannot silently test less. */
  holds?: GgufWeightType[];
}

const CASES: Case[] = [
  { name: "F32", type: "F32" },
  { name: "F16", type: "F16" },
  { name: "BF16", type: "BF16", untied: true },
  { name: "Q8_0", type: "Q8_0" },
  { name: "Q4_0", type: "Q4_0", untied: true },
  { name: "Q4_K", type: "Q4_K" },
  { name: "Q6_K", type: "Q6_K" },
  { name: "Q4_1", type: "Q4_1", untied: true },
  { name: "Q5_0", type: "Q5_0" },
  { name: "Q5_1", type: "Q5_1", untied: true },
  { name: "Q5_K", type: "Q5_K" },
  { name: "Q3_K", type: "Q3_K", untied: true },
  { name: "IQ4_NL", type: "IQ4_NL" },
  { name: "IQ4_XS", type: "IQ4_XS", untied: true },
  { name: "Q4_K_M mix", type: "Q4_K", untied: true, typeOf: q4kmMix, holds: ["Q4_K", "Q6_K"] },
  {
    name: "Q3_K_M (llama.cpp's recipe)",
    type: "Q3_K",
    untied: true,
    typeOf: recipe("q3_k_m", SPEC),
    holds: ["Q3_K", "Q4_K", "Q5_K", "Q6_K"],
  },
  {
    name: "Q4_K_M, hidden 160 (llama.cpp's recipe and fallbacks)",
    type: "Q4_K",
    spec: NARROW,
    typeOf: recipe("q4_k_m", NARROW),
    holds: ["Q5_0", "Q8_0", "Q4_K", "Q6_K"],
  },
];

/**
 * Bounds relative to the largest |logit|, as in model_logits_test.ts: the reference holds the
 * file's values exactly, so what is left is the GPU's rounding: summation order on the f32 path,
 * and on the f16 path f16 KV (and f16 weights where the file's are not already f16-exact).
 */
const BOUND = { f32: 2e-4, f16: 2e-2 };
const PROMPT = 12;
const GENERATED = 6;

Deno.test("GGUF models: logits and greedy tokens match the float64 reference", async (t) => {
  const seed = testSeed();
  const gpus: { label: "f32" | "f16"; gpu: Gpu }[] = [];
  const def = await testGpu();
  gpus.push({ label: def.f16 ? "f16" : "f32", gpu: def });
  for (const c of CASES) {
    const dir = await Deno.makeTempDir({ prefix: "sluice-gguf-model-" });
    try {
      const spec = c.spec ?? SPEC;
      const g = await writeTinyGguf(dir, { ...spec, tied: c.untied ? false : spec.tied, seed }, {
        type: c.type,
        typeOf: c.typeOf,
      });
      const held = new Set([...(await readGguf(g.path)).tensors.values()].map((t) => t.typeName));
      for (const type of c.holds ?? [c.type]) {
        assert(held.has(type), `${c.name}: no ${type} tensor`);
      }
      const reference = await openModelDir(g.referenceDir);
      // One type on the f32 path too: the quantized kernels' f32 accumulation, without f16 KV.
      const runs = c.type === "Q4_K" && !c.typeOf && def.f16
        ? [...gpus, { label: "f32" as const, gpu: await testGpuF32() }]
        : gpus;
      for (const { label, gpu } of runs) {
        await t.step(`${c.name} (${label})`, async () => {
          await withCheckEngine(
            { modelDir: g.path, gpu },
            (engine) =>
              checkModel(engine, reference, BOUND[label], `${c.name} ${label} seed ${seed}`, {
                prompt: PROMPT,
                generated: GENERATED,
              }),
          );
        });
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});
