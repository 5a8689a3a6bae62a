// llama.cpp's converter permutes the rows of attn_q and attn_k within each head so that its
// interleaved RoPE (pairs 2i, 2i+1) computes what Hugging Face's rotate-half RoPE (pairs i,
// i + headDim/2) does. It does so for llama-architecture files (Mistral's included) only: qwen2
// and qwen3 files use llama.cpp's NEOX RoPE, which is rotate-half, and keep Hugging Face's rows. Writing a GGUF applies the permutation (gguf_convert.ts); loading one undoes
// it (weights/gguf_upload.ts), since Sluice's rope kernel is rotate-half: whole rows move, which
// works for quantized rows as well (a block never spans two rows).

import type { Architecture, LlamaConfig } from "../model/config.ts";

/** Families whose GGUF files are of llama.cpp's "llama" architecture, with permuted rows. */
// SmolLM3's converter is Llama's (and llama.cpp runs it with Llama's RoPE); phi3 files use NEOX.
const PERMUTED_FAMILIES: readonly Architecture[] = ["llama", "mistral", "smollm3"];

/**
 * Heads whose rows a GGUF tensor holds permuted (the attn_q and attn_k weights of a llama-arch
 * file), by its GGUF name; else 0.
 */
export function permutedHeads(
  cfg: Pick<LlamaConfig, "numHeads" | "numKvHeads" | "architecture">,
  ggufName: string,
): number {
  if (!PERMUTED_FAMILIES.includes(cfg.architecture)) return 0;
  return /\.attn_q\.weight$/.test(ggufName)
    ? cfg.numHeads
    : /\.attn_k\.weight$/.test(ggufName)
    ? cfg.numKvHeads
    : 0;
}

/**
 * convert_hf_to_gguf.py's permute() on `heads` heads of `group` rows each, row by row: Hugging Face
 * row s * group/2 + i of a head becomes GGUF row 2i + s. Yields [Hugging Face row, GGUF row].
 */
function* permutedRows(heads: number, group: number): Generator<[number, number]> {
  const half = group / 2;
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < half; i++) {
      for (let s = 0; s < 2; s++) yield [h * group + s * half + i, h * group + 2 * i + s];
    }
  }
}

/** Applies permute() to the rows (of `cols` values) of a Hugging Face q or k projection. */
export function permuteRows(
  values: Float64Array,
  heads: number,
  group: number,
  cols: number,
): Float64Array {
  const out = new Float64Array(values.length);
  for (const [hf, gguf] of permutedRows(heads, group)) {
    out.set(values.subarray(hf * cols, (hf + 1) * cols), gguf * cols);
  }
  return out;
}

/** Undoes permute() on GGUF rows of `rowBytes` bytes (raw, so quantized rows move as well). */
export function unpermuteRows(
  raw: Uint8Array,
  heads: number,
  group: number,
  rowBytes: number,
): Uint8Array {
  const out = new Uint8Array(raw.length);
  for (const [hf, gguf] of permutedRows(heads, group)) {
    out.set(raw.subarray(gguf * rowBytes, (gguf + 1) * rowBytes), hf * rowBytes);
  }
  return out;
}
