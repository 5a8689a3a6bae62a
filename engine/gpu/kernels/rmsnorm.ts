// Binds shaders/rmsnorm.wgsl: RMS normalization of each row, scaled by a weight vector.

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import type { BufferArg } from "../kernel.ts";
import source from "../../../shaders/rmsnorm.wgsl" with { type: "text" };

export interface RmsNormArgs {
  /** f32 [rows, D]. */
  x: BufferArg;
  /** W [D]. */
  w: BufferArg;
  /** f32 [rows, D]; must not be x. */
  y: BufferArg;
  D: number;
  eps: number;
}

/** Rows per workgroup, one per lane (matches LANES in the shader). */
const LANES = 8;
const MAX_WORKGROUPS = 65535;

export function bindRmsNorm(gpu: Gpu, args: RmsNormArgs): BoundKernel {
  const { D, eps } = args;
  if (!Number.isInteger(D) || D < 1) throw new RangeError(`rmsnorm: bad D ${D}`);
  if (!(eps >= 0)) throw new RangeError(`rmsnorm: bad eps ${eps}`);
  const pipeline = getPipeline(gpu, source, D % 4 === 0 ? "rmsnormVec" : "rmsnormScalar");
  const params = new ParamsUniform(gpu, [D, { f32: eps }]);
  const bindGroup = bindBuffers(gpu, pipeline, [params.buffer, args.x, args.w, args.y]);
  return {
    kind: "norm",
    encode(pass, rows) {
      if (rows <= 0) return;
      const groups = Math.ceil(rows / LANES);
      if (groups > MAX_WORKGROUPS) {
        throw new RangeError(`rmsnorm: ${rows} rows exceed one dispatch`);
      }
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(groups);
    },
  };
}
