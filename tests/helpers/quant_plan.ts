// Which of the quantized matmul's pipelines the kernel tests compile, shared by the three files that
// test it (quant_kernels_test.ts: storage weights; matmul_quant_texture_test.ts: texture weights
// against their storage twin; matmul_quant_norm_test.ts: the fused norm).
//
// A pipeline is one (format, row tile, mode, x binding, weight layout): llvmpipe takes 5-60 s to
// compile each on a cold shader cache, so the whole product (12 formats × 3 tiles × 2 modes × 2 x
// bindings × 2 layouts = 288) is not run. Each of those has its own code (format: the block decode;
// tile: the unrolled rows; glu against store/add; the x declaration; the weight loads); store and
// add share a pipeline, and a fused norm is a uniform flag, not code. The files sample the product
// pairwise, as follows:
// - every format meets every tile, mode, x binding and layout (quant_kernels_test covers each
//   format's three tiles, both x bindings and both modes; the texture and norm files its texture,
//   at the 1- and 4-row tiles);
// - every tile meets every mode, x binding and layout in some format;
// - the 16-row tile with x in storage (the slowest to compile: 16 outputs per lane, 50-80 s) runs
//   for TALL_TYPES only, and from a texture (16 s) for TALL_TEXTURE_TYPES only;
// - the storage-weight pipelines with x in a uniform at 1 and 16 rows are the ones every GGUF model
//   test compiles (tests/engine/gguf_model_test.ts, architectures_test.ts), so those hit the cache.

import { QUANT_TYPES, type QuantType } from "../../engine/quant/formats.ts";

/**
 * The formats whose 16-row tile is also checked with x in storage (compiling it takes 50-80 s on a
 * cold cache, against 1-3 s with x in a uniform): one block format stands for all, since the tile's
 * unrolled rows and x loads are the same code for every format.
 */
export const TALL_TYPES: readonly QuantType[] = ["q8_0"];

/**
 * The formats whose 16-row tile is also checked from a texture (16 s to compile each on a cold
 * cache): a 32-value and a 256-value block format, for the texture's row-straddling offsets.
 */
export const TALL_TEXTURE_TYPES: readonly QuantType[] = ["q8_0", "q4_k"];

/** Alternates a choice between formats: true for every other format in QUANT_TYPES' order. */
export function everyOther(type: QuantType): boolean {
  const i = QUANT_TYPES.indexOf(type);
  if (i < 0) throw new Error(`unknown quant type ${type}`);
  return i % 2 === 0;
}
