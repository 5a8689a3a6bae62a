// Binds shaders/residual_norm.wgsl: a branch's output RMS-normed and added to the residual stream,
// y += rmsnorm(x) · w (Gemma 3's norms after attention and after the MLP, which a matmul cannot
// fuse: the norm needs the whole output row the matmul's parts write).

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import type { BufferArg } from "../kernel.ts";
import source from "../../../shaders/residual_norm.wgsl" with { type: "text" };

export interface ResidualNormArgs {
  /** f32 [rows, D]: the branch's output. */
  x: BufferArg;
  /** f32 [rows, D]: the residual stream, added to in place. */
  y: BufferArg;
  /** W [D]: the norm's weights. */
  w: BufferArg;
  D: number;
  eps: number;
}

const MAX_WORKGROUPS = 65535;

export function bindResidualNorm(gpu: Gpu, args: ResidualNormArgs): BoundKernel {
  const { D, eps } = args;
  if (!Number.isInteger(D) || D < 1) throw new RangeError(`residualNorm: bad D ${D}`);
  if (!(eps >= 0)) throw new RangeError(`residualNorm: bad eps ${eps}`);
  const pipeline = getPipeline(gpu, source, "main");
  const params = new ParamsUniform(gpu, [D, { f32: eps }]);
  const bindGroup = bindBuffers(gpu, pipeline, [params.buffer, args.x, args.y, args.w]);
  return {
    kind: "norm",
    encode(pass, rows) {
      if (rows <= 0) return;
      if (rows > MAX_WORKGROUPS) {
        throw new RangeError(`residualNorm: ${rows} rows exceed one dispatch`);
      }
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(rows);
    },
  };
}
