// Binds shaders/gather.wgsl: copies selected rows of x into consecutive rows of y.

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import type { BufferArg } from "../kernel.ts";
import source from "../../../shaders/gather.wgsl" with { type: "text" };

export interface GatherRowsArgs {
  /** f32 [anyRows, D]. */
  x: BufferArg;
  /** u32 [rows]: the row of x that becomes row s of y. */
  rowIndex: BufferArg;
  /** f32 [rows, D]; must not be x. */
  y: BufferArg;
  D: number;
}

const MAX_WORKGROUPS = 65535;

export function bindGatherRows(gpu: Gpu, args: GatherRowsArgs): BoundKernel {
  const { D } = args;
  if (!Number.isInteger(D) || D < 1) throw new RangeError(`gather: bad D ${D}`);
  const pipeline = getPipeline(gpu, source, D % 4 === 0 ? "gatherVec" : "gatherScalar");
  const params = new ParamsUniform(gpu, [D]);
  const bindGroup = bindBuffers(gpu, pipeline, [params.buffer, args.rowIndex, args.x, args.y]);
  return {
    kind: "norm",
    encode(pass, rows) {
      if (rows <= 0) return;
      if (rows > MAX_WORKGROUPS) throw new RangeError(`gather: ${rows} rows exceed one dispatch`);
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(rows);
    },
  };
}
