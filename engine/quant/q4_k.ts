// Q4_K: super-blocks of 256 values, { f16 d; f16 dmin; u8 scales[12]; u8 qs[128] } (144 bytes).
//
// Eight sub-blocks of 32 values each have a 6-bit scale sc and a 6-bit min m, packed in the 12
// scale bytes (see scaleMinK4): value = d*sc * q - dmin*m with q a 4-bit quant. The quants come in
// four 32-byte groups, each covering 64 values: the low nibbles are sub-block 2g, the high
// nibbles sub-block 2g + 1.

import { f16BitsToF32, f32ToF16Bits } from "./half.ts";

const ELEMS = 256;
const BYTES = 144;
const f = Math.fround;

/** Sub-block j's 6-bit [scale, min] from the 12 packed bytes starting at `s`. */
export function scaleMinK4(bytes: Uint8Array, s: number, j: number): [number, number] {
  if (j < 4) return [bytes[s + j] & 63, bytes[s + j + 4] & 63];
  return [
    (bytes[s + j + 4] & 0xf) | ((bytes[s + j - 4] >> 6) << 4),
    (bytes[s + j + 4] >> 4) | ((bytes[s + j] >> 6) << 4),
  ];
}

export function dequantizeQ4K(bytes: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0; b < blocks; b++) {
    const o = b * BYTES;
    const d = f16BitsToF32(bytes[o] | (bytes[o + 1] << 8));
    const dmin = f16BitsToF32(bytes[o + 2] | (bytes[o + 3] << 8));
    for (let g = 0; g < 4; g++) {
      const [sc1, m1] = scaleMinK4(bytes, o + 4, 2 * g);
      const [sc2, m2] = scaleMinK4(bytes, o + 4, 2 * g + 1);
      const d1 = f(d * sc1), min1 = f(dmin * m1);
      const d2 = f(d * sc2), min2 = f(dmin * m2);
      for (let l = 0; l < 32; l++) {
        const q = bytes[o + 16 + 32 * g + l];
        out[b * ELEMS + 64 * g + l] = f(d1 * (q & 0xf)) - min1;
        out[b * ELEMS + 64 * g + 32 + l] = f(d2 * (q >> 4)) - min2;
      }
    }
  }
}

/**
 * Each sub-block's range [min(0, lo), hi] maps to 0..15; the sub-block scales and mins are then
 * quantized to 6 bits against the super-block's largest, and the quants rounded against the
 * stored (rounded) scales so the decoded values stay closest to the input.
 */
export function quantizeQ4K(values: Float32Array, blocks: number, out: Uint8Array): void {
  for (let b = 0; b < blocks; b++) {
    const x = values.subarray(b * ELEMS, (b + 1) * ELEMS);
    const o = b * BYTES;
    const quant = writeScaleMinK4(x, 15, out, o);
    for (let g = 0; g < 4; g++) {
      for (let l = 0; l < 32; l++) {
        const lo = quant(2 * g, x[64 * g + l]);
        const hi = quant(2 * g + 1, x[64 * g + 32 + l]);
        out[o + 16 + 32 * g + l] = lo | (hi << 4);
      }
    }
  }
}

/**
 * The K-quants' shared header (Q4_K, Q5_K): writes f16 d, dmin and the 12 packed bytes of 6-bit
 * sub-block scales and mins for the 256 values `x`, each 32-value sub-block's range
 * [min(0, lo), hi] mapped to 0..levels. Returns the quantizer of value v of sub-block j against
 * the stored (rounded) scales, so decoded values stay closest to the input.
 */
export function writeScaleMinK4(
  x: Float32Array,
  levels: number,
  out: Uint8Array,
  o: number,
): (j: number, v: number) => number {
  const scales: number[] = [], mins: number[] = [];
  for (let j = 0; j < 8; j++) {
    const sub = x.subarray(32 * j, 32 * j + 32);
    const lo = Math.min(0, ...sub), hi = Math.max(0, ...sub);
    scales.push((hi - lo) / levels);
    mins.push(-lo);
  }
  const dBits = f32ToF16Bits(Math.max(...scales) / 63);
  const dminBits = f32ToF16Bits(Math.max(...mins) / 63);
  const d = f16BitsToF32(dBits), dmin = f16BitsToF32(dminBits);
  const sc = scales.map((s) => d === 0 ? 0 : Math.min(63, Math.round(s / d)));
  const m = mins.map((v) => dmin === 0 ? 0 : Math.min(63, Math.round(v / dmin)));
  out[o] = dBits & 0xff;
  out[o + 1] = dBits >> 8;
  out[o + 2] = dminBits & 0xff;
  out[o + 3] = dminBits >> 8;
  for (let j = 0; j < 4; j++) {
    out[o + 4 + j] = sc[j] | ((sc[j + 4] >> 4) << 6);
    out[o + 8 + j] = m[j] | ((m[j + 4] >> 4) << 6);
    out[o + 12 + j] = (sc[j + 4] & 0xf) | ((m[j + 4] & 0xf) << 4);
  }
  return (j, v) => {
    const step = f(d * sc[j]);
    if (step === 0) return 0;
    return Math.max(0, Math.min(levels, Math.round((v + f(dmin * m[j])) / step)));
  };
}
