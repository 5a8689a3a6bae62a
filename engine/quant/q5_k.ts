// Q5_K: super-blocks of 256 values, { f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] }
// (176 bytes): Q4_K (q4_k.ts) with a fifth bit per quant. Sub-block j (32 values) has Q4_K's 6-bit
// scale and min: value = d*sc * q - dmin*m. The low 4 bits come in Q4_K's 64-value nibble groups;
// value 32j + l (l in 0..31) takes its fifth bit from bit j of qh[l].

import { f16BitsToF32 } from "./half.ts";
import { scaleMinK4, writeScaleMinK4 } from "./q4_k.ts";

const ELEMS = 256;
const BYTES = 176;
const f = Math.fround;

/** The 5-bit quant of value i (0..255) of the block starting at `o`. */
export function q5kQuant(bytes: Uint8Array, o: number, i: number): number {
  const j = i >> 5, l = i & 31;
  const nibble = (bytes[o + 48 + 32 * (j >> 1) + l] >> (4 * (j & 1))) & 0xf;
  return nibble | (((bytes[o + 16 + l] >> j) & 1) << 4);
}

export function dequantizeQ5K(bytes: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0; b < blocks; b++) {
    const o = b * BYTES;
    const d = f16BitsToF32(bytes[o] | (bytes[o + 1] << 8));
    const dmin = f16BitsToF32(bytes[o + 2] | (bytes[o + 3] << 8));
    for (let j = 0; j < 8; j++) {
      const [sc, m] = scaleMinK4(bytes, o + 4, j);
      const dj = f(d * sc), mj = f(dmin * m);
      for (let l = 0; l < 32; l++) {
        out[b * ELEMS + 32 * j + l] = f(f(dj * q5kQuant(bytes, o, 32 * j + l)) - mj);
      }
    }
  }
}

/** Q4_K's quantizer (q4_k.ts) with 32 levels per sub-block. */
export function quantizeQ5K(values: Float32Array, blocks: number, out: Uint8Array): void {
  for (let b = 0; b < blocks; b++) {
    const x = values.subarray(b * ELEMS, (b + 1) * ELEMS);
    const o = b * BYTES;
    out.fill(0, o, o + BYTES);
    const quant = writeScaleMinK4(x, 31, out, o);
    for (let i = 0; i < ELEMS; i++) {
      const j = i >> 5, l = i & 31, q = quant(j, x[i]);
      out[o + 48 + 32 * (j >> 1) + l] |= (q & 0xf) << (4 * (j & 1));
      out[o + 16 + l] |= (q >> 4) << j;
    }
  }
}
