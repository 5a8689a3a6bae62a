// Finds NaN and ±Inf in raw checkpoint bytes, so a corrupt or badly converted checkpoint is refused
// at load (naming the tensor) instead of serving NaN logits. It runs on every chunk as the weights
// stream in, so it must cost little next to the read: a branch-free pass over 32-bit words tests
// every element's exponent at once (two f16/bf16 halves per word), and only a chunk that holds a
// bad value is walked again element by element to say where.

import type { StDtype } from "./safetensors.ts";

/**
 * Per dtype: the exponent bits of one element placed in each element slot of a 32-bit word, and
 * the lowest exponent bit in each slot. Exponent all ones (NaN or Inf) plus that bit carries into
 * the slot's top bit; any smaller exponent does not. No carry crosses into the next slot.
 */
const LAYOUT: Record<StDtype, { bytes: number; exponent: number; one: number; top: number }> = {
  F32: { bytes: 4, exponent: 0x7f800000, one: 0x00800000, top: 0x80000000 },
  F16: { bytes: 2, exponent: 0x7c007c00, one: 0x04000400, top: 0x80008000 },
  BF16: { bytes: 2, exponent: 0x7f807f80, one: 0x00800080, top: 0x80008000 },
};

/** Index of the first NaN or infinite element of little-endian `raw`, or -1 when all are finite. */
export function firstNonFinite(raw: Uint8Array, dtype: StDtype): number {
  const { bytes, exponent, one, top } = LAYOUT[dtype];
  const words = raw.byteLength >>> 2;
  let flags = 0;
  if (raw.byteOffset % 4 === 0) {
    const u32 = new Uint32Array(raw.buffer, raw.byteOffset, words);
    for (let i = 0; i < words; i++) flags |= (u32[i] & exponent) + one;
  } else {
    const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    for (let i = 0; i < words; i++) flags |= (view.getUint32(i * 4, true) & exponent) + one;
  }
  // A trailing half-word (an odd number of 16-bit elements).
  if (raw.byteLength % 4 === 2) {
    const last = raw[raw.byteLength - 2] | (raw[raw.byteLength - 1] << 8);
    flags |= ((last & exponent) + one) & 0xffff;
  }
  if ((flags & top) === 0) return -1;
  return locate(raw, bytes, exponent & (bytes === 4 ? 0xffffffff : 0xffff));
}

/** The slow path: the first element whose exponent bits are all ones. */
function locate(raw: Uint8Array, bytes: number, exponent: number): number {
  const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  const n = raw.byteLength / bytes;
  for (let i = 0; i < n; i++) {
    const bits = bytes === 4 ? view.getUint32(i * 4, true) : view.getUint16(i * 2, true);
    if (((bits & exponent) >>> 0) === exponent >>> 0) return i;
  }
  return -1;
}
