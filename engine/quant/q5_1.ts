// Q5_1: blocks of 32 values, { f16 d; f16 m; u8 qh[4]; u8 qs[16] } (24 bytes): Q5_0's 5-bit
// quants (q5_0.ts) with Q4_1's offset instead of a fixed one: value = d * q + m.

import { f16BitsToF32 } from "./half.ts";
import { writeScaleAndMin } from "./q4_1.ts";
import { q5Quant, writeQ5Quants } from "./q5_0.ts";

const ELEMS = 32;
const BYTES = 24;
const f = Math.fround;

export function dequantizeQ5_1(bytes: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0; b < blocks; b++) {
    const o = b * BYTES;
    const d = f16BitsToF32(bytes[o] | (bytes[o + 1] << 8));
    const m = f16BitsToF32(bytes[o + 2] | (bytes[o + 3] << 8));
    for (let i = 0; i < ELEMS; i++) out[b * ELEMS + i] = f(f(q5Quant(bytes, o + 4, i) * d) + m);
  }
}

/** The block's [min, max] maps to 0..31, rounded against the stored d and m. */
export function quantizeQ5_1(values: Float32Array, blocks: number, out: Uint8Array): void {
  for (let b = 0; b < blocks; b++) {
    const x = values.subarray(b * ELEMS, (b + 1) * ELEMS);
    const [d, m] = writeScaleAndMin(x, 31, out, b * BYTES);
    const q = Array.from(
      x,
      (v) => d === 0 ? 0 : Math.max(0, Math.min(31, Math.round((v - m) / d))),
    );
    writeQ5Quants(q, out, b * BYTES + 4);
  }
}
