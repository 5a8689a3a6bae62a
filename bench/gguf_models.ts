// The SmolLM2-shaped random model (decode.ts) as GGUF files of each quantization the decode
// benchmark compares, written once and cached beside it, and the recipe of each: which tensor
// gets which type, as llama-quantize would choose for this shape. The vocabulary is padded to the
// embedding's rows (gguf_vocab_pad.ts) so llama.cpp loads the same files (`bench llamacpp`).

import type { GgmlTypeName } from "../engine/formats/gguf.ts";
import { convertToGguf } from "../engine/formats/gguf_convert.ts";
import { GGML_BLOCKS } from "../engine/formats/gguf.ts";
import { benchCacheDir, SMOLLM2_SHAPE, smolShapedModelDir } from "./common/smol_model.ts";
import { padGgufVocab } from "./gguf_vocab_pad.ts";

export const QUANT_KINDS = ["f16", "q8_0", "q4_0", "q4_k_m"] as const;
export type QuantKind = typeof QUANT_KINDS[number];

/** Bump when a recipe or the converter changes, so cached files are rewritten. */
const RECIPE_VERSION = 1;

/** The model as a GGUF file of `kind`, written on first use. */
export async function smolShapedGguf(kind: QuantKind): Promise<string> {
  // "p": the vocabulary padded to the embedding's rows (files written before lack the "p").
  const path = `${benchCacheDir()}/bench-smollm2-shape-v1-${kind}-r${RECIPE_VERSION}p.gguf`;
  try {
    await Deno.stat(path);
  } catch {
    const source = await smolShapedModelDir();
    console.error(`writing the SmolLM2-shaped model as ${kind} GGUF to ${path} ...`);
    const tmp = `${path}.tmp-${Deno.pid}`;
    await convertToGguf(source, tmp, { typeOf: (name, dims) => typeOf(kind, name, dims) });
    await padGgufVocab(tmp, `${tmp}-padded`);
    await Deno.remove(tmp);
    await Deno.rename(`${tmp}-padded`, path);
  }
  return path;
}

/**
 * The type of one matrix. f16, q8_0 and q4_0 put every matrix in that type (llama-quantize
 * --pure). q4_k_m follows llama.cpp's llama_tensor_get_type (src/llama-quant.cpp) for
 * LLAMA_FTYPE_MOSTLY_Q4_K_M on a llama model with tied embeddings.
 */
export function typeOf(kind: QuantKind, name: string, dims: number[]): GgmlTypeName {
  if (kind !== "q4_k_m") return kind.toUpperCase() as GgmlTypeName;
  return fitRow(q4kmChoice(name), dims[0]);
}

/** llama.cpp's use_more_bits(): the first and last eighth of layers, and every third between. */
function useMoreBits(layer: number, layers: number): boolean {
  const eighth = Math.floor(layers / 8);
  return layer < eighth || layer >= Math.floor(7 * layers / 8) || (layer - eighth) % 3 === 2;
}

function q4kmChoice(name: string): GgmlTypeName {
  // With tied embeddings token_embd is also the output, and takes the output's rule: Q6_K.
  if (name === "token_embd.weight" || name === "output.weight") return "Q6_K";
  const m = /^blk\.(\d+)\.(attn_v|ffn_down)\./.exec(name);
  if (m && useMoreBits(Number(m[1]), SMOLLM2_SHAPE.numLayers)) return "Q6_K";
  return "Q4_K";
}

/**
 * llama.cpp's fallback for rows that are not whole 256-value super-blocks (hidden 576 here):
 * Q6_K becomes Q8_0 and Q4_K becomes Q5_0. Sluice cannot load Q5_0, so Q4_0 stands in for it
 * (Q5_0 is Q4_0 with a fifth bit per weight: 22 bytes per 32 values against 18).
 */
function fitRow(type: GgmlTypeName, cols: number): GgmlTypeName {
  if (cols % GGML_BLOCKS[type].elems === 0) return type;
  const fallback: GgmlTypeName = type === "Q6_K" ? "Q8_0" : "Q4_0";
  return cols % GGML_BLOCKS[fallback].elems === 0 ? fallback : "F16";
}

/** Markdown lines: each matrix role's type by layers, and what the loader makes of fused ones. */
export function describeRecipe(kind: QuantKind): string[] {
  const { hiddenSize: h, intermediateSize: ff, numLayers } = SMOLLM2_SHAPE;
  const roles: [string, number][] = [
    ["attn_q", h],
    ["attn_k", h],
    ["attn_v", h],
    ["attn_output", h],
    ["ffn_gate", h],
    ["ffn_up", h],
    ["ffn_down", ff],
  ];
  const lines = [
    `- \`token_embd\` (tied, also the output): ${typeOf(kind, "token_embd.weight", [h])}`,
  ];
  const perLayer = (role: string, cols: number) =>
    Array.from({ length: numLayers }, (_, i) => typeOf(kind, `blk.${i}.${role}.weight`, [cols]));
  for (const [role, cols] of roles) {
    const types = perLayer(role, cols);
    const byType = new Map<string, number[]>();
    types.forEach((t, i) => byType.set(t, [...(byType.get(t) ?? []), i]));
    const parts = [...byType].map(([t, layers]) =>
      byType.size === 1 ? t : `${t} in layers ${layers.join(", ")}`
    );
    lines.push(`- \`${role}\`: ${parts.join("; ")}`);
  }
  // weights/gguf_upload.ts fuses q/k/v and gate/up; a fused matrix whose parts differ loads as f16.
  const fused: [string, string[]][] = [["q/k/v", ["attn_q", "attn_k", "attn_v"]], [
    "gate/up",
    ["ffn_gate", "ffn_up"],
  ]];
  for (const [label, parts] of fused) {
    const types = parts.map((role) => perLayer(role, h));
    const layers = types[0].map((_, i) => i);
    const mixed = layers.filter((i) => new Set(types.map((t) => t[i])).size > 1);
    if (mixed.length === 0) continue;
    const whole = layers.find((i) => !mixed.includes(i));
    lines.push(
      `- loaded: the fused ${label} matrix is dequantized to f16 in layers ${mixed.join(", ")} ` +
        `(its parts differ)` + (whole === undefined ? "" : `, ${types[0][whole]} elsewhere`),
    );
  }
  return lines;
}
