// IQ4_NL: blocks of 32 values, { f16 d; u8 qs[16] } (18 bytes), Q4_0's layout (byte j: value j in
// the low nibble, value j + 16 in the high one) with a non-linear code: value = d * IQ4_VALUES[q].
// The 16 levels are denser near zero, where most weights lie.

import { f16BitsToF32, f32ToF16Bits } from "./half.ts";

const ELEMS = 32;
const BYTES = 18;

/** GGML's 4-bit non-linear levels (kvalues_iq4nl), shared by IQ4_NL and IQ4_XS. */
export const IQ4_VALUES: readonly number[] = [
  -127,
  -104,
  -83,
  -65,
  -49,
  -35,
  -22,
  -10,
  1,
  13,
  25,
  38,
  53,
  69,
  89,
  113,
];

/** The index of the level nearest `t` (in units of the block's scale). */
export function nearestIq4(t: number): number {
  let best = 0;
  for (let q = 1; q < 16; q++) {
    if (Math.abs(IQ4_VALUES[q] - t) < Math.abs(IQ4_VALUES[best] - t)) best = q;
  }
  return best;
}

export function dequantizeIq4Nl(bytes: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0; b < blocks; b++) {
    const o = b * BYTES;
    const d = f16BitsToF32(bytes[o] | (bytes[o + 1] << 8));
    for (let j = 0; j < 16; j++) {
      const q = bytes[o + 2 + j];
      out[b * ELEMS + j] = d * IQ4_VALUES[q & 0xf];
      out[b * ELEMS + j + 16] = d * IQ4_VALUES[q >> 4];
    }
  }
}

/** The value of largest magnitude maps to the level -127 (d may be negative), others to the nearest
 * level. */
export function quantizeIq4Nl(values: Float32Array, blocks: number, out: Uint8Array): void {
  for (let b = 0; b < blocks; b++) {
    const x = values.subarray(b * ELEMS, (b + 1) * ELEMS);
    const max = x.reduce((m, v) => Math.abs(v) > Math.abs(m) ? v : m, 0);
    const dBits = f32ToF16Bits(max / -127);
    const d = f16BitsToF32(dBits);
    const q = (v: number) => nearestIq4(d === 0 ? 0 : v / d);
    const o = b * BYTES;
    out[o] = dBits & 0xff;
    out[o + 1] = dBits >> 8;
    for (let j = 0; j < 16; j++) out[o + 2 + j] = q(x[j]) | (q(x[j + 16]) << 4);
  }
}
