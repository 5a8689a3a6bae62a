// Binds shaders/bias_add.wgsl: a bias vector added in place to every row (Qwen2's q, k, v biases
// on the fused qkv rows). A kernel of its own rather than a matmul epilogue, so the dense and
// quantized matmuls stay as they are.

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import type { BufferArg } from "../kernel.ts";
import source from "../../../shaders/bias_add.wgsl" with { type: "text" };

export interface BiasAddArgs {
  /** f32 [rows, width], updated in place. */
  x: BufferArg;
  /** W [width]. */
  b: BufferArg;
  width: number;
}

/** Lanes per workgroup along a row (matches LANES in the shader). */
const LANES = 64;
const MAX_WORKGROUPS = 65535;

export function bindBiasAdd(gpu: Gpu, args: BiasAddArgs): BoundKernel {
  const { width } = args;
  if (!Number.isInteger(width) || width < 1) throw new RangeError(`biasAdd: bad width ${width}`);
  const pipeline = getPipeline(gpu, source, "main");
  const params = new ParamsUniform(gpu, [width]);
  const bindGroup = bindBuffers(gpu, pipeline, [params.buffer, args.x, args.b]);
  const groups = Math.ceil(width / LANES);
  return {
    kind: "weights",
    encode(pass, rows) {
      if (rows <= 0) return;
      if (rows > MAX_WORKGROUPS) throw new RangeError(`biasAdd: ${rows} rows exceed one dispatch`);
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(groups, rows);
    },
  };
}
