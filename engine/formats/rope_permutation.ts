// llama.cpp's converter permutes the rows of attn_q and attn_k within each head so that its
// interleaved RoPE (pairs 2i, 2i+1) computes what Hugging Face's rotate-half RoPE (pairs i,
// i + headDim/2) does. Writing a GGUF applies the permutation (gguf_convert.ts); loading one undoes
// it (weights/gguf_upload.ts), since Sluice's rope kernel is rotate-half: whole rows move, which
// works for quantized rows as well (a block never spans two rows).

import type { LlamaConfig } from "../model/config.ts";

/** Heads whose rows a GGUF tensor holds permuted (attn_q, attn_k), by its GGUF name; else 0. */
export function permutedHeads(
  cfg: Pick<LlamaConfig, "numHeads" | "numKvHeads">,
  ggufName: string,
): number {
  return ggufName.includes("attn_q")
    ? cfg.numHeads
    : ggufName.includes("attn_k")
    ? cfg.numKvHeads
    : 0;
}

/** convert_hf_to_gguf.py's permute(): HF row s * group/2 + i of a head becomes row 2i + s. */
export function permuteRows(
  values: Float64Array,
  heads: number,
  group: number,
  cols: number,
): Float64Array {
  const out = new Float64Array(values.length);
  const half = group / 2;
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < half; i++) {
      for (let s = 0; s < 2; s++) {
        const src = (h * group + s * half + i) * cols;
        out.set(values.subarray(src, src + cols), (h * group + 2 * i + s) * cols);
      }
    }
  }
  return out;
}

/**
 * Undoes convert_hf_to_gguf.py's permute() on `heads` heads of `group` rows each: GGUF row
 * 2i + s of a head holds Hugging Face row s * group/2 + i.
 */
export function unpermuteRows(
  raw: Uint8Array,
  heads: number,
  group: number,
  rowBytes: number,
): Uint8Array {
  const out = new Uint8Array(raw.length);
  const half = group / 2;
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < half; i++) {
      for (let s = 0; s < 2; s++) {
        const src = (h * group + 2 * i + s) * rowBytes;
        const dst = (h * group + s * half + i) * rowBytes;
        out.set(raw.subarray(src, src + rowBytes), dst);
      }
    }
  }
  return out;
}
