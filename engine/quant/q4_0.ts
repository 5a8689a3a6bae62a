// Q4_0: blocks of 32 values, { f16 d; u8 qs[16] } (18 bytes). Byte j holds value j in its low
// nibble and value j + 16 in its high nibble, each stored with an offset of 8: value = d * (q - 8).

import { f16BitsToF32, f32ToF16Bits } from "./half.ts";

const ELEMS = 32;
const BYTES = 18;

export function dequantizeQ4_0(bytes: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0; b < blocks; b++) {
    const o = b * BYTES;
    const d = f16BitsToF32(bytes[o] | (bytes[o + 1] << 8));
    for (let j = 0; j < 16; j++) {
      const q = bytes[o + 2 + j];
      out[b * ELEMS + j] = ((q & 0xf) - 8) * d;
      out[b * ELEMS + j + 16] = ((q >> 4) - 8) * d;
    }
  }
}

/** Like GGML's reference: the value of largest magnitude maps to -8, so d may be negative. */
export function quantizeQ4_0(values: Float32Array, blocks: number, out: Uint8Array): void {
  for (let b = 0; b < blocks; b++) {
    const x = values.subarray(b * ELEMS, (b + 1) * ELEMS);
    const max = x.reduce((m, v) => Math.abs(v) > Math.abs(m) ? v : m, 0);
    const dBits = f32ToF16Bits(max / -8);
    const d = f16BitsToF32(dBits);
    const q = (v: number) => d === 0 ? 8 : Math.max(0, Math.min(15, Math.round(v / d) + 8));
    const o = b * BYTES;
    out[o] = dBits & 0xff;
    out[o + 1] = dBits >> 8;
    for (let j = 0; j < 16; j++) out[o + 2 + j] = q(x[j]) | (q(x[j + 16]) << 4);
  }
}
