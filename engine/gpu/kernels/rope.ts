// Binds shaders/rope.wgsl: rotary position embedding, in place, on the q and k heads of qkv rows.

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import type { BufferArg } from "../kernel.ts";
import source from "../../../shaders/rope.wgsl" with { type: "text" };

export interface RopeArgs {
  /** f32 [rows, (numHeads + 2*numKvHeads) * headDim], laid out [q heads | k heads | v heads]. */
  qkv: BufferArg;
  /** u32 [rows]: each row's position. */
  positions: BufferArg;
  /** f32 [headDim / 2]. */
  invFreq: BufferArg;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
}

/** Lanes per workgroup along the rotated pairs (matches LANES in the shader). */
const LANES = 32;
const MAX_WORKGROUPS = 65535;

export function bindRope(gpu: Gpu, args: RopeArgs): BoundKernel {
  const { numHeads, numKvHeads, headDim } = args;
  for (const [name, v] of Object.entries({ numHeads, numKvHeads, headDim })) {
    if (!Number.isInteger(v) || v < 1) throw new RangeError(`rope: bad ${name} ${v}`);
  }
  if (headDim % 2 !== 0) throw new RangeError(`rope: headDim ${headDim} must be even`);
  const pipeline = getPipeline(gpu, source, "main");
  const params = new ParamsUniform(gpu, [
    numHeads + numKvHeads,
    headDim,
    (numHeads + 2 * numKvHeads) * headDim,
  ]);
  const bindGroup = bindBuffers(gpu, pipeline, [
    params.buffer,
    args.qkv,
    args.positions,
    args.invFreq,
  ]);
  const groups = Math.ceil(headDim / 2 / LANES);
  return {
    kind: "attention",
    encode(pass, rows) {
      if (rows <= 0) return;
      if (rows > MAX_WORKGROUPS) throw new RangeError(`rope: ${rows} rows exceed one dispatch`);
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(groups, rows);
    },
  };
}
