// Q6_K: super-blocks of 256 values, { u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d } (210 bytes).
//
// A 6-bit quant q (stored with an offset of 32) is its low 4 bits from ql and its high 2 bits
// from qh; value = d * scales[sub] * (q - 32), with 16 sub-blocks of 16 values. Each half of 128
// values uses 64 ql bytes and 32 qh bytes: for l in 0..31, value l takes ql[l]'s low nibble,
// l + 32 ql[l + 32]'s low nibble, l + 64 ql[l]'s high nibble, l + 96 ql[l + 32]'s high nibble, and
// their high bits are qh[l]'s bit pairs 0-1, 2-3, 4-5 and 6-7.

import { f16BitsToF32, f32ToF16Bits } from "./half.ts";

const ELEMS = 256;
const BYTES = 210;
const f = Math.fround;

/** Quant (0..63, offset 32) of value i (0..255) of the block starting at `o`. */
export function q6Quant(bytes: Uint8Array, o: number, i: number): number {
  const half = i >> 7, r = i & 127, l = r & 31, quarter = r >> 5;
  const ql = bytes[o + 64 * half + l + (quarter & 1) * 32];
  const low = quarter < 2 ? ql & 0xf : ql >> 4;
  const high = (bytes[o + 128 + 32 * half + l] >> (2 * quarter)) & 3;
  return low | (high << 4);
}

export function dequantizeQ6K(bytes: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0; b < blocks; b++) {
    const o = b * BYTES;
    const d = f16BitsToF32(bytes[o + 208] | (bytes[o + 209] << 8));
    for (let i = 0; i < ELEMS; i++) {
      const sc = (bytes[o + 192 + (i >> 4)] << 24) >> 24;
      out[b * ELEMS + i] = f(f(d * sc) * (q6Quant(bytes, o, i) - 32));
    }
  }
}

export function quantizeQ6K(values: Float32Array, blocks: number, out: Uint8Array): void {
  for (let b = 0; b < blocks; b++) {
    const x = values.subarray(b * ELEMS, (b + 1) * ELEMS);
    const subScales: number[] = [];
    for (let j = 0; j < 16; j++) {
      subScales.push(
        x.subarray(16 * j, 16 * j + 16).reduce((m, v) => Math.max(m, Math.abs(v)), 0) / 31,
      );
    }
    const dBits = f32ToF16Bits(Math.max(...subScales) / 127);
    const d = f16BitsToF32(dBits);
    const sc = subScales.map((s) => d === 0 ? 0 : Math.min(127, Math.round(s / d)));
    const o = b * BYTES;
    out.fill(0, o, o + BYTES);
    for (let j = 0; j < 16; j++) out[o + 192 + j] = sc[j] & 0xff;
    out[o + 208] = dBits & 0xff;
    out[o + 209] = dBits >> 8;
    for (let i = 0; i < ELEMS; i++) {
      const step = f(d * sc[i >> 4]);
      const q = step === 0 ? 32 : Math.max(0, Math.min(63, Math.round(x[i] / step) + 32));
      const half = i >> 7, r = i & 127, l = r & 31, quarter = r >> 5;
      out[o + 64 * half + l + (quarter & 1) * 32] |= (q & 0xf) << (quarter < 2 ? 0 : 4);
      out[o + 128 + 32 * half + l] |= (q >> 4) << (2 * quarter);
    }
  }
}
