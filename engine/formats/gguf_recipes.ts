// Which GGML type each tensor of a Llama model gets in the GGUF files people download, as
// llama.cpp's llama-quantize chooses (llama_tensor_get_type in src/llama-quant.cpp): the mixes
// (Q3_K_M, Q4_K_M, Q5_K_M, Q6_K, Q8_0, IQ4_XS) and single-type files (--pure), each with
// llama.cpp's fallback for rows that are not whole blocks (576-wide rows in SmolLM2: Q4_K becomes
// Q5_0, Q6_K Q8_0). gguf_convert.ts writes a model by such a recipe; tests and the decode
// benchmark build their quantized models with it.

import { GGML_BLOCKS, type GgmlTypeName } from "./gguf.ts";

/** The mixes llama-quantize names by their main type (lower case, as in file names). */
export const GGUF_MIXES = ["q3_k_m", "q4_k_m", "q5_k_m", "q6_k", "q8_0", "iq4_xs"] as const;
export type GgufMix = typeof GGUF_MIXES[number];

export interface RecipeModel {
  numLayers: number;
  /** Query heads per KV head. */
  gqa: number;
  /** Embeddings tied to the output (token_embd then takes the output's type). */
  tied: boolean;
}

/**
 * The type of the matrix `name` (a GGUF tensor name) with ggml dims [cols, rows] under `mix`, or
 * every matrix `pure` in one type (llama-quantize --pure), falling back where rows don't fit.
 */
export function recipeType(
  recipe: GgufMix | { pure: GgmlTypeName },
  model: RecipeModel,
  name: string,
  dims: number[],
): GgmlTypeName {
  const chosen = typeof recipe === "string" ? mixChoice(recipe, model, name, dims[0]) : recipe.pure;
  return fitRow(chosen, dims[0]);
}

/** The main type of each mix, before the per-tensor rules. */
const MAIN: Record<GgufMix, GgmlTypeName> = {
  q3_k_m: "Q3_K",
  q4_k_m: "Q4_K",
  q5_k_m: "Q5_K",
  q6_k: "Q6_K",
  q8_0: "Q8_0",
  iq4_xs: "IQ4_XS",
};

/** llama.cpp's use_more_bits(): the first and last eighth of layers, and every third between. */
function useMoreBits(layer: number, layers: number): boolean {
  const eighth = Math.floor(layers / 8);
  return layer < eighth || layer >= Math.floor(7 * layers / 8) || (layer - eighth) % 3 === 2;
}

function mixChoice(mix: GgufMix, model: RecipeModel, name: string, cols: number): GgmlTypeName {
  const main = MAIN[mix];
  const { numLayers: n } = model;
  if (name === "output.weight" || (model.tied && name === "token_embd.weight")) {
    if (cols % 256 !== 0) return "Q8_0";
    return main === "Q8_0" ? "Q8_0" : "Q6_K";
  }
  const m = /^blk\.(\d+)\.(\w+)\.weight$/.exec(name);
  if (!m) return main;
  const layer = Number(m[1]), role = m[2];
  if (role === "attn_v") {
    if (mix === "q3_k_m") return layer < 2 ? "Q5_K" : "Q4_K";
    if (mix === "iq4_xs" && model.gqa >= 4) return "Q5_K";
    if ((mix === "q4_k_m" || mix === "q5_k_m") && useMoreBits(layer, n)) return "Q6_K";
  } else if (role === "ffn_down") {
    if (mix === "q3_k_m") return layer < Math.floor(n / 16) ? "Q5_K" : "Q4_K";
    if ((mix === "q4_k_m" || mix === "q5_k_m") && useMoreBits(layer, n)) return "Q6_K";
    // Without an importance matrix, as these test and benchmark files are written.
    if (mix === "iq4_xs" && layer < Math.floor(n / 8)) return "Q5_K";
  } else if (role === "attn_output" && mix === "q3_k_m") {
    return "Q4_K";
  } else if (role === "attn_qkv") {
    // Fused q/k/v (phi3): a step above the main type in the K mixes.
    if (mix === "q3_k_m") return "Q4_K";
    if (mix === "q4_k_m") return "Q5_K";
    if (mix === "q5_k_m") return "Q6_K";
  }
  return main;
}

/** llama.cpp's fallback for rows that are not whole blocks of `type`: a 32-value type, else F16. */
function fitRow(type: GgmlTypeName, cols: number): GgmlTypeName {
  if (cols % GGML_BLOCKS[type].elems === 0) return type;
  const fallback: Partial<Record<GgmlTypeName, GgmlTypeName>> = {
    Q3_K: "IQ4_NL",
    IQ4_XS: "IQ4_NL",
    Q4_K: "Q5_0",
    Q5_K: "Q5_1",
    Q6_K: "Q8_0",
  };
  const other = fallback[type];
  return other && cols % GGML_BLOCKS[other].elems === 0 ? other : "F16";
}
