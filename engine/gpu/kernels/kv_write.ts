// Binds shaders/kv_write.wgsl (shaders/kv_write_q8.wgsl where the cache is q8_0, quantizing on the
// way): rows' K and V heads from qkv into one layer's paged KV cache, each K head rotated by its
// row's position on the way (RoPE, shaders/rope_rotation.wgsl), so the cache holds post-RoPE keys
// without a RoPE pass of its own.

import { type Gpu, kvDtypeOf } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import source from "../../../shaders/kv_write.wgsl" with { type: "text" };
import q8Source from "../../../shaders/kv_write_q8.wgsl" with { type: "text" };
import rope from "../../../shaders/rope_rotation.wgsl" with { type: "text" };
import { q8ScaleWordsPerRow, requireQ8HeadDim } from "../../kv/kv_format.ts";

import type { BufferArg } from "../kernel.ts";

export interface KvWriteArgs {
  /** f32 [rows, (numHeads + 2*numKvHeads) * headDim], laid out [q | k | v]. */
  qkv: BufferArg;
  /** This layer's K cache, KV [numBlocks, blockSize, numKvHeads, headDim] (q8_0: kv_format.ts). */
  k: BufferArg;
  /** This layer's V cache, same shape as k. */
  v: BufferArg;
  /** u32 [numLayers, maxSlots, maxBlocksPerSeq]. */
  blockTable: BufferArg;
  /** u32 [rows]: each row's slot in the running batch. */
  rowSlot: BufferArg;
  /** u32 [rows]: each row's position in its sequence (the angle its K heads are rotated by). */
  rowPos: BufferArg;
  /** f32 [rotaryDim / 2]: RoPE's inverse frequencies. */
  invFreq: BufferArg;
  layer: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  blockSize: number;
  maxSlots: number;
  maxBlocksPerSeq: number;
  /**
   * Values of each head RoPE turns, the first ones (a multiple of 8; partial rotary where below
   * headDim); 0: none (a layer without RoPE). Default headDim.
   */
  rotaryDim?: number;
  /** What the turned values are scaled by (LongRoPE's attention factor); default 1. */
  ropeScale?: number;
}

/** Largest row count one dispatch takes (one workgroup per row along x). */
export const MAX_KV_WRITE_ROWS = 65535;

export function bindKvWrite(gpu: Gpu, args: KvWriteArgs): BoundKernel {
  // A vec4's RoPE partners are then the vec4 headDim/2 away.
  if (args.headDim % 8 !== 0) {
    throw new RangeError(`kv_write: headDim ${args.headDim} must be a multiple of 8`);
  }
  const rotaryDim = checkRotaryDim("kv_write", args.rotaryDim, args.headDim);
  const q8 = kvDtypeOf(gpu) === "q8_0";
  if (q8) requireQ8HeadDim(args.headDim);
  const pipeline = q8
    ? getPipeline(gpu, q8Source + rope, "main", {
      HD: args.headDim,
      SW: q8ScaleWordsPerRow(args.headDim),
    })
    : getPipeline(gpu, source + rope, "main");
  const params = new ParamsUniform(gpu, [
    args.layer,
    args.numHeads,
    args.numKvHeads,
    args.headDim,
    args.blockSize,
    args.maxSlots,
    args.maxBlocksPerSeq,
    rotaryDim / 8,
    { f32: args.ropeScale ?? 1 },
  ]);
  const group = bindBuffers(gpu, pipeline, [
    params.buffer,
    args.qkv,
    args.k,
    args.v,
    args.blockTable,
    args.rowSlot,
    args.rowPos,
    args.invFreq,
  ]);
  return {
    kind: "attention",
    encode(pass, rows) {
      if (rows > MAX_KV_WRITE_ROWS) {
        throw new RangeError(`kv_write: ${rows} rows exceed ${MAX_KV_WRITE_ROWS}`);
      }
      if (rows <= 0) return;
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(rows);
    },
  };
}

/** The rotary width a kernel is given: headDim by default, else a multiple of 8 up to it. */
export function checkRotaryDim(kernel: string, rotaryDim: number | undefined, headDim: number) {
  const dim = rotaryDim ?? headDim;
  if (!Number.isInteger(dim) || dim < 0 || dim > headDim || dim % 8 !== 0) {
    throw new RangeError(`${kernel}: rotaryDim ${dim} must be a multiple of 8 up to ${headDim}`);
  }
  return dim;
}
