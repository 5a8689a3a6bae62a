// IQ4_XS: super-blocks of 256 values, { f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128] }
// (136 bytes): eight 32-value sub-blocks, each IQ4_NL's nibbles (iq4_nl.ts) with a 6-bit scale ls
// instead of an f16 one: value = d * (ls - 32) * IQ4_VALUES[q]. Sub-block j's ls has its low 4
// bits in nibble j & 1 of scales_l[j >> 1] and its high 2 bits at bits 2j of scales_h; its quants
// are qs[16j..16j + 15] (low nibbles values 0..15, high nibbles 16..31).

import { f16BitsToF32, f32ToF16Bits } from "./half.ts";
import { IQ4_VALUES, nearestIq4 } from "./iq4_nl.ts";

const ELEMS = 256;
const BYTES = 136;
const f = Math.fround;

/** Sub-block j's 6-bit scale (0..63, offset 32) of the block starting at `o`. */
export function iq4xsScale(bytes: Uint8Array, o: number, j: number): number {
  const low = (bytes[o + 4 + (j >> 1)] >> (4 * (j & 1))) & 0xf;
  const scalesH = bytes[o + 2] | (bytes[o + 3] << 8);
  return low | (((scalesH >> (2 * j)) & 3) << 4);
}

export function dequantizeIq4Xs(bytes: Uint8Array, blocks: number, out: Float32Array): void {
  for (let b = 0; b < blocks; b++) {
    const o = b * BYTES;
    const d = f16BitsToF32(bytes[o] | (bytes[o + 1] << 8));
    for (let j = 0; j < 8; j++) {
      const dl = f(d * (iq4xsScale(bytes, o, j) - 32));
      for (let l = 0; l < 16; l++) {
        const q = bytes[o + 8 + 16 * j + l];
        out[b * ELEMS + 32 * j + l] = f(dl * IQ4_VALUES[q & 0xf]);
        out[b * ELEMS + 32 * j + 16 + l] = f(dl * IQ4_VALUES[q >> 4]);
      }
    }
  }
}

/**
 * Each sub-block's value of largest magnitude maps to the level -127; the signed sub-block scales
 * are rounded to 6 bits against the largest, and the quants to the nearest level of the stored
 * scale.
 */
export function quantizeIq4Xs(values: Float32Array, blocks: number, out: Uint8Array): void {
  for (let b = 0; b < blocks; b++) {
    const x = values.subarray(b * ELEMS, (b + 1) * ELEMS);
    const subScales: number[] = [];
    for (let j = 0; j < 8; j++) {
      const sub = x.subarray(32 * j, 32 * j + 32);
      subScales.push(sub.reduce((m, v) => Math.abs(v) > Math.abs(m) ? v : m, 0) / -127);
    }
    const dBits = f32ToF16Bits(Math.max(...subScales.map(Math.abs)) / 31);
    const d = f16BitsToF32(dBits);
    const sc = subScales.map((s) => d === 0 ? 0 : Math.max(-31, Math.min(31, Math.round(s / d))));
    const o = b * BYTES;
    out.fill(0, o, o + BYTES);
    out[o] = dBits & 0xff;
    out[o + 1] = dBits >> 8;
    let scalesH = 0;
    for (let j = 0; j < 8; j++) {
      const ls = sc[j] + 32;
      out[o + 4 + (j >> 1)] |= (ls & 0xf) << (4 * (j & 1));
      scalesH |= (ls >> 4) << (2 * j);
      const step = f(d * sc[j]);
      const q = (v: number) => nearestIq4(step === 0 ? 0 : v / step);
      for (let l = 0; l < 16; l++) {
        out[o + 8 + 16 * j + l] = q(x[32 * j + l]) | (q(x[32 * j + 16 + l]) << 4);
      }
    }
    out[o + 2] = scalesH & 0xff;
    out[o + 3] = scalesH >> 8;
  }
}
