// Binds shaders/qk_norm.wgsl: Qwen3's per-head RMSNorm of the q and k heads of fused qkv rows, in
// place, before RoPE (which kv_write and attention apply as they read the heads).

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import type { BufferArg } from "../kernel.ts";
import source from "../../../shaders/qk_norm.wgsl" with { type: "text" };

export interface QkNormArgs {
  /** f32 [rows, (numHeads + 2*numKvHeads) * headDim], laid out [q heads | k heads | v heads]. */
  qkv: BufferArg;
  /** W [2, headDim]: the q norm's weights, then the k norm's. */
  w: BufferArg;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  eps: number;
}

/** Heads per workgroup, one per lane (matches LANES in the shader). */
const LANES = 8;
const MAX_WORKGROUPS = 65535;

export function bindQkNorm(gpu: Gpu, args: QkNormArgs): BoundKernel {
  const { numHeads, numKvHeads, headDim, eps } = args;
  for (const [name, v] of Object.entries({ numHeads, numKvHeads, headDim })) {
    if (!Number.isInteger(v) || v < 1) throw new RangeError(`qkNorm: bad ${name} ${v}`);
  }
  if (!(eps >= 0)) throw new RangeError(`qkNorm: bad eps ${eps}`);
  const pipeline = getPipeline(gpu, source, "main");
  const params = new ParamsUniform(gpu, [numHeads, numKvHeads, headDim, { f32: eps }]);
  const bindGroup = bindBuffers(gpu, pipeline, [params.buffer, args.qkv, args.w]);
  const groups = Math.ceil((numHeads + numKvHeads) / LANES);
  return {
    kind: "norm",
    encode(pass, rows) {
      if (rows <= 0) return;
      if (rows > MAX_WORKGROUPS) throw new RangeError(`qkNorm: ${rows} rows exceed one dispatch`);
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(groups, rows);
    },
  };
}
