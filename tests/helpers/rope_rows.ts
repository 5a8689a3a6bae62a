// qkv rows as a RoPE pass would leave them, in float64: kv_write rotates k heads and attention q
// heads inside the kernels, so their tests compare against rows rotated here.

import { applyRope } from "./reference_llama.ts";

/** Inverse frequencies as the GPU holds them (f32), for base `theta`. */
export function testInvFreq(headDim: number, theta: number): Float32Array {
  return Float32Array.from({ length: headDim / 2 }, (_, i) => 1 / theta ** ((2 * i) / headDim));
}

/**
 * Rows of qkv ([q heads | k heads | v heads] each) with every q and k head rotated by its row's
 * position (Hugging Face's rotate_half), in float64 from the f32 inputs and frequencies: the first
 * `rotaryDim` values of each head (default all; 0 leaves them), scaled by `ropeScale`.
 */
export function ropeRows(
  qkv: Float32Array,
  positions: Uint32Array,
  shape: {
    numHeads: number;
    numKvHeads: number;
    headDim: number;
    rotaryDim?: number;
    ropeScale?: number;
  },
  invFreq: Float32Array,
): Float64Array {
  const { numHeads, numKvHeads, headDim } = shape;
  const rotaryDim = shape.rotaryDim ?? headDim;
  const width = (numHeads + 2 * numKvHeads) * headDim;
  const freqs = Float64Array.from(invFreq);
  const out = Float64Array.from(qkv);
  positions.forEach((pos, m) => {
    for (let h = 0; h < numHeads + numKvHeads; h++) {
      applyRope(out, m * width + h * headDim, rotaryDim, pos, freqs, shape.ropeScale ?? 1);
    }
  });
  return out;
}
