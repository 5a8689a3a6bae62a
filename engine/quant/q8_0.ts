// Q8_0: blocks of 32 values, { f16 d; int8 q[32] } (34 bytes); value i = d * q[i].

import { f16BitsToF32, f32ToF16Bits } from "./half.ts";

const ELEMS = 32;
const BYTES = 34;

export function dequantizeQ8_0(bytes: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0; b < blocks; b++) {
    const o = b * BYTES;
    const d = f16BitsToF32(bytes[o] | (bytes[o + 1] << 8));
    for (let i = 0; i < ELEMS; i++) {
      out[b * ELEMS + i] = ((bytes[o + 2 + i] << 24) >> 24) * d;
    }
  }
}

export function quantizeQ8_0(values: Float32Array, blocks: number, out: Uint8Array): void {
  for (let b = 0; b < blocks; b++) {
    const x = values.subarray(b * ELEMS, (b + 1) * ELEMS);
    const amax = x.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    const dBits = f32ToF16Bits(amax / 127);
    const d = f16BitsToF32(dBits);
    const o = b * BYTES;
    out[o] = dBits & 0xff;
    out[o + 1] = dBits >> 8;
    for (let i = 0; i < ELEMS; i++) {
      const q = d === 0 ? 0 : Math.max(-127, Math.min(127, Math.round(x[i] / d)));
      out[o + 2 + i] = q & 0xff;
    }
  }
}
