// How one KV block (one layer's K, or its V, for blockSize positions) is laid out in bytes, per KV
// dtype. Every size of a block (the device pool from --gpu-kv-mb, the host tier from --host-kv-mb,
// the copies between them, the cost model's bytes) comes from kvBlockBytes here, so a block is
// one self-contained run of bytes that the tiers move as it is, whatever its dtype.
//
// f16 / f32: [blockSize, numKvHeads, headDim] values.
// q8_0 (after GGML's Q8_0: groups of 32 values along the head dim, int8 each, one scale per group):
//   quants  [blockSize, numKvHeads, headDim] int8, four to a u32 word, little-endian;
//   scales  [blockSize, numKvHeads, scaleWords] u32 words, each two f16 scales (low half: the even
//           group), a row's count rounded up to whole words so that no word is shared between two
//           positions or heads (the write kernel's invocations then never touch one word together);
//   the block padded to 16 bytes, so that every block starts on a vec4<u32> (the kernels' unit).
// The scale is f16: 34 bytes per 32 values (f32 scales would take 36), and the kernels unpack it
// with unpack2x16float, which needs no shader-f16. Scales after all quants keep each quant group
// on whole vec4 words, so the attention kernel loads 16 values with one 16-byte load.

import type { KvDtype } from "../gpu/device.ts";

/** Values per q8_0 group (one scale each). */
export const Q8_GROUP = 32;

export interface KvBlockDims {
  blockSize: number;
  numKvHeads: number;
  headDim: number;
}

/** u32 words of f16 scales per (position, head) row of a q8_0 block. */
export function q8ScaleWordsPerRow(headDim: number): number {
  return Math.ceil(headDim / Q8_GROUP / 2);
}

/** Bytes of the quants of a q8_0 block; the scales start here. */
export function q8QuantBytes(dims: KvBlockDims): number {
  return dims.blockSize * dims.numKvHeads * dims.headDim;
}

/** Bytes of one block of K (the same again for V) in `dtype`. */
export function kvBlockBytes(dtype: KvDtype, dims: KvBlockDims): number {
  const values = dims.blockSize * dims.numKvHeads * dims.headDim;
  if (dtype === "f16") return values * 2;
  if (dtype === "f32") return values * 4;
  requireQ8HeadDim(dims.headDim);
  const scales = dims.blockSize * dims.numKvHeads * q8ScaleWordsPerRow(dims.headDim) * 4;
  return Math.ceil((q8QuantBytes(dims) + scales) / 16) * 16;
}

/** q8_0 groups whole 32-value runs of one head: the head dim must be a multiple of 32. */
export function requireQ8HeadDim(headDim: number): void {
  if (!Number.isInteger(headDim) || headDim % Q8_GROUP !== 0) {
    throw new RangeError(
      `--kv-dtype q8_0 needs a head dim that is a multiple of ${Q8_GROUP}; this model's is ` +
        `${headDim} (use --kv-dtype f16 or f32)`,
    );
  }
}
