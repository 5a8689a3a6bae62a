// Where each GGML block format keeps its f16 scales, and the check that none is NaN or Inf. A
// block's values are its scales times small integers, so a bad scale is the only way a quantized
// tensor can hold NaN or Inf: checking the scales is the block formats' counterpart of
// formats/finite_check.ts, cheap enough to run on every chunk as the weights stream in.

import { QUANT_FORMATS, type QuantType } from "./formats.ts";

/** Byte offsets of a block's f16 scales (d, and dmin or m where the format has one). */
const SCALE_OFFSETS: Record<QuantType, readonly number[]> = {
  q8_0: [0], // d, then 32 int8
  q4_0: [0], // d, then 16 bytes of nibbles
  q4_k: [0, 2], // d, dmin, then 12 bytes of 6-bit scales and 128 of nibbles
  q6_k: [208], // 128 low bits, 64 high bits, 16 int8 scales, then d
  q4_1: [0, 2], // d, m, then 16 bytes of nibbles
  q5_0: [0], // d, then 4 bytes of fifth bits and 16 of nibbles
  q5_1: [0, 2], // d, m, then as q5_0
  q5_k: [0, 2], // d, dmin, then 12 bytes of 6-bit scales, 32 of fifth bits, 128 of nibbles
  q3_k: [108], // 32 bytes of high bits, 64 of low bits, 12 of 6-bit scales, then d
  iq4_nl: [0], // d, then 16 bytes of nibbles
  iq4_xs: [0], // d, then 2 + 4 bytes of 6-bit scales and 128 of nibbles
};

/** f16 exponent bits: all ones is Inf (mantissa 0) or NaN. */
const F16_EXPONENT = 0x7c00;

/** Index of the first block of `raw` (whole blocks of `type`) with a NaN or Inf scale, or -1. */
export function firstNonFiniteBlock(raw: Uint8Array, type: QuantType): number {
  const { blockBytes } = QUANT_FORMATS[type];
  const offsets = SCALE_OFFSETS[type];
  const blocks = Math.floor(raw.byteLength / blockBytes);
  for (let b = 0; b < blocks; b++) {
    for (const o of offsets) {
      const at = b * blockBytes + o;
      const bits = raw[at] | (raw[at + 1] << 8);
      if ((bits & F16_EXPONENT) === F16_EXPONENT) return b;
    }
  }
  return -1;
}
