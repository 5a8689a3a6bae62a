// Q5_0: blocks of 32 values, { f16 d; u8 qh[4]; u8 qs[16] } (22 bytes). A 5-bit quant q (stored
// with an offset of 16) is its low 4 bits from qs, as Q4_0's nibbles (byte j: value j low, value
// j + 16 high), and its fifth bit from the little-endian u32 qh, bit i for value i:
// value = d * (q - 16).

import { f16BitsToF32, f32ToF16Bits } from "./half.ts";

const ELEMS = 32;
const BYTES = 22;

/** The 5-bit quant of value i (0..31) of a block whose qh starts at `qh` and qs at `qh + 4`. */
export function q5Quant(bytes: Uint8Array, qh: number, i: number): number {
  const nibble = (bytes[qh + 4 + (i & 15)] >> (i < 16 ? 0 : 4)) & 0xf;
  const high = (bytes[qh + (i >> 3)] >> (i & 7)) & 1;
  return nibble | (high << 4);
}

/** Writes 32 five-bit quants as qh (4 bytes) then qs (16 bytes) at `qh`. */
export function writeQ5Quants(q: number[], out: Uint8Array, qh: number): void {
  out.fill(0, qh, qh + 20);
  for (let i = 0; i < 32; i++) {
    out[qh + 4 + (i & 15)] |= (q[i] & 0xf) << (i < 16 ? 0 : 4);
    out[qh + (i >> 3)] |= (q[i] >> 4) << (i & 7);
  }
}

export function dequantizeQ5_0(bytes: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0; b < blocks; b++) {
    const o = b * BYTES;
    const d = f16BitsToF32(bytes[o] | (bytes[o + 1] << 8));
    for (let i = 0; i < ELEMS; i++) out[b * ELEMS + i] = (q5Quant(bytes, o + 2, i) - 16) * d;
  }
}

/** As Q4_0: the value of largest magnitude maps to -16, so d may be negative. */
export function quantizeQ5_0(values: Float32Array, blocks: number, out: Uint8Array): void {
  for (let b = 0; b < blocks; b++) {
    const x = values.subarray(b * ELEMS, (b + 1) * ELEMS);
    const max = x.reduce((m, v) => Math.abs(v) > Math.abs(m) ? v : m, 0);
    const dBits = f32ToF16Bits(max / -16);
    const d = f16BitsToF32(dBits);
    const o = b * BYTES;
    out[o] = dBits & 0xff;
    out[o + 1] = dBits >> 8;
    const q = Array.from(
      x,
      (v) => d === 0 ? 16 : Math.max(0, Math.min(31, Math.round(v / d) + 16)),
    );
    writeQ5Quants(q, out, o + 2);
  }
}
