// Q3_K: super-blocks of 256 values, { u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d } (110 bytes).
//
// A 3-bit quant is 2 low bits from qs and a high bit from hmask; value = d * (sc - 32) * (q - 4),
// with 16 sub-blocks of 16 values, each with a 6-bit scale sc. For value i: the low bits are bits
// 2·((i >> 5) & 3) of qs[32·(i >> 7) + (i & 31)], the high bit is bit i >> 5 of hmask[i & 31].
// Scale k's low 4 bits are the nibble (k >> 3) of scales[k & 7], its high 2 bits the bit pair
// (k >> 2) of scales[8 + (k & 3)].

import { f16BitsToF32, f32ToF16Bits } from "./half.ts";

const ELEMS = 256;
const BYTES = 110;
const f = Math.fround;

/** The 3-bit quant (0..7, offset 4) of value i (0..255) of the block starting at `o`. */
export function q3kQuant(bytes: Uint8Array, o: number, i: number): number {
  const low = (bytes[o + 32 + 32 * (i >> 7) + (i & 31)] >> (2 * ((i >> 5) & 3))) & 3;
  return low | (((bytes[o + (i & 31)] >> (i >> 5)) & 1) << 2);
}

/** Sub-block k's 6-bit scale (0..63, offset 32) from the 12 bytes starting at `s`. */
export function q3kScale(bytes: Uint8Array, s: number, k: number): number {
  const low = (bytes[s + (k & 7)] >> (4 * (k >> 3))) & 0xf;
  return low | (((bytes[s + 8 + (k & 3)] >> (2 * (k >> 2))) & 3) << 4);
}

export function dequantizeQ3K(bytes: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0; b < blocks; b++) {
    const o = b * BYTES;
    const d = f16BitsToF32(bytes[o + 108] | (bytes[o + 109] << 8));
    for (let i = 0; i < ELEMS; i++) {
      const dl = f(d * (q3kScale(bytes, o + 96, i >> 4) - 32));
      out[b * ELEMS + i] = f(dl * (q3kQuant(bytes, o, i) - 4));
    }
  }
}

/**
 * Each sub-block's value of largest magnitude maps to -4 (as Q4_0's to -8); the signed sub-block
 * scales are rounded to 6 bits against the largest, and the quants against the stored scales.
 */
export function quantizeQ3K(values: Float32Array, blocks: number, out: Uint8Array): void {
  for (let b = 0; b < blocks; b++) {
    const x = values.subarray(b * ELEMS, (b + 1) * ELEMS);
    const subScales: number[] = [];
    for (let k = 0; k < 16; k++) {
      const sub = x.subarray(16 * k, 16 * k + 16);
      subScales.push(sub.reduce((m, v) => Math.abs(v) > Math.abs(m) ? v : m, 0) / -4);
    }
    const dBits = f32ToF16Bits(Math.max(...subScales.map(Math.abs)) / 31);
    const d = f16BitsToF32(dBits);
    const sc = subScales.map((s) => d === 0 ? 0 : Math.max(-31, Math.min(31, Math.round(s / d))));
    const o = b * BYTES;
    out.fill(0, o, o + BYTES);
    for (let k = 0; k < 16; k++) {
      const stored = sc[k] + 32;
      out[o + 96 + (k & 7)] |= (stored & 0xf) << (4 * (k >> 3));
      out[o + 96 + 8 + (k & 3)] |= (stored >> 4) << (2 * (k >> 2));
    }
    out[o + 108] = dBits & 0xff;
    out[o + 109] = dBits >> 8;
    for (let i = 0; i < ELEMS; i++) {
      const step = f(d * sc[i >> 4]);
      const q = step === 0 ? 4 : Math.max(0, Math.min(7, Math.round(x[i] / step) + 4));
      out[o + 32 + 32 * (i >> 7) + (i & 31)] |= (q & 3) << (2 * ((i >> 5) & 3));
      out[o + (i & 31)] |= (q >> 2) << (i >> 5);
    }
  }
}
