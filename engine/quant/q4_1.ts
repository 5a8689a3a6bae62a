// Q4_1: blocks of 32 values, { f16 d; f16 m; u8 qs[16] } (20 bytes). Byte j holds value j in its
// low nibble and value j + 16 in its high nibble: value = d * q + m, an offset instead of Q4_0's
// fixed -8, so a block whose values are all of one sign keeps all 16 levels for its range.

import { f16BitsToF32, f32ToF16Bits } from "./half.ts";

const ELEMS = 32;
const BYTES = 20;
const f = Math.fround;

export function dequantizeQ4_1(bytes: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0; b < blocks; b++) {
    const o = b * BYTES;
    const d = f16BitsToF32(bytes[o] | (bytes[o + 1] << 8));
    const m = f16BitsToF32(bytes[o + 2] | (bytes[o + 3] << 8));
    for (let j = 0; j < 16; j++) {
      const q = bytes[o + 4 + j];
      out[b * ELEMS + j] = f(f((q & 0xf) * d) + m);
      out[b * ELEMS + j + 16] = f(f((q >> 4) * d) + m);
    }
  }
}

/** The block's [min, max] maps to 0..15; quants are rounded against the stored (f16) d and m. */
export function quantizeQ4_1(values: Float32Array, blocks: number, out: Uint8Array): void {
  for (let b = 0; b < blocks; b++) {
    const x = values.subarray(b * ELEMS, (b + 1) * ELEMS);
    const [d, m] = writeScaleAndMin(x, 15, out, b * BYTES);
    const q = (v: number) => d === 0 ? 0 : Math.max(0, Math.min(15, Math.round((v - m) / d)));
    for (let j = 0; j < 16; j++) out[b * BYTES + 4 + j] = q(x[j]) | (q(x[j + 16]) << 4);
  }
}

/** Writes f16 d = (max - min) / levels and m = min at `o`; returns them as stored. */
export function writeScaleAndMin(
  x: Float32Array,
  levels: number,
  out: Uint8Array,
  o: number,
): [number, number] {
  let lo = Infinity, hi = -Infinity;
  for (const v of x) {
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  const dBits = f32ToF16Bits((hi - lo) / levels), mBits = f32ToF16Bits(lo);
  out[o] = dBits & 0xff;
  out[o + 1] = dBits >> 8;
  out[o + 2] = mBits & 0xff;
  out[o + 3] = mBits >> 8;
  return [f16BitsToF32(dBits), f16BitsToF32(mBits)];
}
