// The SmolLM2-shaped random model (decode.ts) as GGUF files of each quantization the decode
// benchmark compares, written once and cached beside it, and the recipe of each: which tensor
// gets which type, as llama-quantize would choose for this shape. The converter pads the vocabulary
// to the embedding's rows, so llama.cpp loads the same files (`bench llamacpp`).

import { convertToGguf, type GgmlTypeName, type GgufMix, recipeType } from "../engine/bench_api.ts";
import {
  benchCacheDir,
  type BenchShape,
  shapedModelDir,
  SHORT_SHAPE,
  SMOLLM2_SHAPE,
} from "./common/smol_model.ts";

/** Single-type files (llama-quantize --pure), f16 the baseline. */
const PURE_KINDS = ["f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"] as const;
/** llama.cpp's mixes (q8_0 is the pure file above: the Q8_0 mix types every matrix Q8_0 too). */
export const MIX_KINDS = ["q3_k_m", "q4_k_m", "q5_k_m", "q6_k", "iq4_xs"] as const;
export const QUANT_KINDS = [...PURE_KINDS, ...MIX_KINDS] as const;
export type QuantKind = typeof QUANT_KINDS[number];

/** Bump when a recipe or the converter changes, so cached files are rewritten. */
const RECIPE_VERSION = 3;

/** The model as a GGUF file of `kind`, written on first use. */
export function smolShapedGguf(kind: QuantKind): Promise<string> {
  return shapedGguf(kind, "smol");
}

/** A bench shape's model as a GGUF file of `kind`, written on first use. */
export async function shapedGguf(kind: QuantKind, shape: BenchShape): Promise<string> {
  const name = shape === "smol" ? "bench-smollm2-shape-v1" : "bench-short-shape-v1";
  const path = `${benchCacheDir()}/${name}-${kind}-r${RECIPE_VERSION}.gguf`;
  try {
    await Deno.stat(path);
  } catch {
    const source = await shapedModelDir(shape);
    console.error(`writing the ${shape}-shaped model as ${kind} GGUF to ${path} ...`);
    const tmp = `${path}.tmp-${Deno.pid}`;
    await convertToGguf(source, tmp, { typeOf: (name, dims) => typeOf(kind, name, dims, shape) });
    await Deno.rename(tmp, path);
  }
  return path;
}

/**
 * The type of one matrix: pure kinds put every matrix in that type, mixes follow llama.cpp's
 * choices (engine/formats/gguf_recipes.ts) for this shape, rows of 576 taking its fallbacks.
 */
export function typeOf(
  kind: QuantKind,
  name: string,
  dims: number[],
  shape: BenchShape = "smol",
): GgmlTypeName {
  const s = shape === "smol" ? SMOLLM2_SHAPE : SHORT_SHAPE;
  const model = { numLayers: s.numLayers, gqa: s.numHeads / s.numKvHeads, tied: s.tied };
  const recipe = (MIX_KINDS as readonly string[]).includes(kind)
    ? kind as GgufMix
    : { pure: kind.toUpperCase() as GgmlTypeName };
  return recipeType(recipe, model, name, dims);
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
  // weights/gguf_upload.ts fuses q/k/v and gate/up: q/k/v of different types keep each its own,
  // gate/up of different types load as f16.
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
      label === "q/k/v"
        ? `- loaded: the fused ${label} matrix keeps its types (one run of row parts per ` +
          `type) in layers ${mixed.join(", ")} (its tensors differ)`
        : `- loaded: the fused ${label} matrix is dequantized to f16 in layers ${
          mixed.join(", ")
        } ` + `(its parts differ)` + (whole === undefined ? "" : `, ${types[0][whole]} elsewhere`),
    );
  }
  return lines;
}
