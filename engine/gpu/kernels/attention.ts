// Binds shaders/attention.wgsl: causal attention of each row over its slot's paged KV cache, over
// all earlier positions or, with a sliding window (Mistral), the last `window` of them. The row's q
// heads are rotated (RoPE, shaders/rope_rotation.wgsl) as they are loaded: qkv holds them
// unrotated.

import { type Gpu, type KvDtype, kvDtypeOf } from "../device.ts";
import { q8ScaleWordsPerRow, requireQ8HeadDim } from "../../kv/kv_format.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import type { BufferArg } from "../kernel.ts";
import source from "../../../shaders/attention.wgsl" with { type: "text" };
import rope from "../../../shaders/rope_rotation.wgsl" with { type: "text" };
import activations from "../../../shaders/activations.wgsl" with { type: "text" };
import { checkRotaryDim } from "./kv_write.ts";

export interface AttentionArgs {
  /**
   * f32 [rows, (numHeads + 2*numKvHeads) * headDim], laid out [q | k | v]; q is read, unrotated.
   */
  qkv: BufferArg;
  /** This layer's K cache, KV [numBlocks, blockSize, numKvHeads, headDim] (q8_0: kv_format.ts). */
  k: BufferArg;
  /** This layer's V cache, same shape as k. */
  v: BufferArg;
  /** u32 [numLayers, maxSlots, maxBlocksPerSeq]. */
  blockTable: BufferArg;
  /** u32 [rows]: each row's slot. */
  rowSlot: BufferArg;
  /**
   * u32 [rows]: each row's position; it attends to positions 0..rowPos inclusive, or with a window
   * rowPos - window + 1..rowPos.
   */
  rowPos: BufferArg;
  /** f32 [rotaryDim / 2]: RoPE's inverse frequencies (q is rotated by rowPos). */
  invFreq: BufferArg;
  /** f32 [rows, numHeads * headDim]. */
  out: BufferArg;
  layer: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  blockSize: number;
  maxSlots: number;
  maxBlocksPerSeq: number;
  /** Positions a row attends to, its own included (sliding window); 0 or absent: all. */
  window?: number;
  /**
   * Values of each head RoPE turns, the first ones (a multiple of 8; partial rotary where below
   * headDim); 0: none (a layer without RoPE). Default headDim.
   */
  rotaryDim?: number;
  /** What the turned values are scaled by (LongRoPE's attention factor); default 1. */
  ropeScale?: number;
  /** What q·k is multiplied by; default 1/√headDim (Gemma 3: query_pre_attn_scalar^-½). */
  scoreScale?: number;
  /** Gemma 2: each scaled score becomes cap·tanh(score / cap) before the softmax; 0 or absent: none. */
  softcap?: number;
}

/** Largest row count one dispatch takes (one workgroup row per token along y). */
export const MAX_ATTENTION_ROWS = 65535;

export function bindAttention(gpu: Gpu, args: AttentionArgs): BoundKernel {
  const { numHeads, numKvHeads, headDim } = args;
  if (headDim % 8 !== 0) {
    throw new RangeError(`attention: headDim ${headDim} must be a multiple of 8`);
  }
  const window = args.window ?? 0;
  if (!Number.isInteger(window) || window < 0) {
    throw new RangeError(`attention: bad window ${window}`);
  }
  if (args.blockSize % 4 !== 0) {
    throw new RangeError(`attention: blockSize ${args.blockSize} must be a multiple of 4`);
  }
  if (numKvHeads < 1 || numHeads % numKvHeads !== 0) {
    throw new RangeError(
      `attention: numHeads ${numHeads} is not a multiple of numKvHeads ${numKvHeads}`,
    );
  }
  const rotaryDim = checkRotaryDim("attention", args.rotaryDim, headDim);
  const softcap = args.softcap ?? 0;
  if (!(softcap >= 0)) throw new RangeError(`attention: bad softcap ${softcap}`);
  const kvDtype = kvDtypeOf(gpu);
  if (kvDtype === "q8_0") requireQ8HeadDim(headDim);
  const headsPerGroup = headsPerWorkgroup(
    numHeads / numKvHeads,
    headDim,
    kvDtype,
    gpu.device.limits.maxComputeWorkgroupStorageSize,
  );
  const pipeline = getPipeline(gpu, source + rope + activations, "main", {
    HD: headDim,
    HPW: headsPerGroup,
    KV_F16: kvDtype === "f16" ? 1 : 0,
    KV_Q8: kvDtype === "q8_0" ? 1 : 0,
    SW: kvDtype === "q8_0" ? q8ScaleWordsPerRow(headDim) : 0,
  });
  const params = new ParamsUniform(gpu, [
    args.layer,
    numHeads,
    numKvHeads,
    args.blockSize,
    args.maxSlots,
    args.maxBlocksPerSeq,
    window,
    rotaryDim / 8,
    { f32: args.ropeScale ?? 1 },
    { f32: args.scoreScale ?? 1 / Math.sqrt(headDim) },
    { f32: softcap },
  ]);
  const bindGroup = bindBuffers(gpu, pipeline, [
    params.buffer,
    args.qkv,
    args.k,
    args.v,
    args.blockTable,
    args.rowSlot,
    args.rowPos,
    args.out,
    args.invFreq,
  ]);
  return {
    kind: "attention",
    encode(pass, rows) {
      if (rows > MAX_ATTENTION_ROWS) {
        throw new RangeError(`attention: ${rows} rows exceed ${MAX_ATTENTION_ROWS}`);
      }
      if (rows <= 0) return;
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(numHeads / headsPerGroup, rows);
    },
  };
}

/**
 * Query heads one workgroup computes: the largest divisor of the GQA group size whose per-lane
 * state (q and accumulator, one vec4 per 4 values of the lane's share of the head dim) stays within
 * 16 vec4s, so that the shader's loops over it unroll into registers on llvmpipe, and whose
 * workgroup memory fits the device.
 */
export function headsPerWorkgroup(
  group: number,
  headDim: number,
  kvDtype: KvDtype,
  workgroupBytes = 16384,
): number {
  const valuesPerChunk = VALUES_PER_CHUNK[kvDtype];
  const chunksPerLane = Math.ceil(headDim / valuesPerChunk / LANES);
  const vec4sPerHead = chunksPerLane * (valuesPerChunk / 4);
  for (let d = group; d > 1; d--) {
    if (group % d !== 0 || d * vec4sPerHead > 16) continue;
    if (sharedBytes(d, d * vec4sPerHead) <= workgroupBytes) return d;
  }
  return 1;
}

// Mirrors shaders/attention.wgsl's constants and workgroup arrays.
const VALUES_PER_CHUNK: Record<KvDtype, number> = { f32: 4, f16: 8, q8_0: 16 };
const LANES = 8;
const GROUPS = 4;
const TP4 = 4;

function sharedBytes(hpw: number, qn: number): number {
  const vec4s = GROUPS * hpw * TP4 * LANES + GROUPS * hpw * TP4 + GROUPS * qn * LANES;
  return 16 * vec4s + 2 * 4 * GROUPS * hpw;
}
