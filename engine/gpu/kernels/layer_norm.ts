// Binds shaders/layer_norm.wgsl: LayerNorm (with bias) in place on each row, as BERT-family
// encoders put after each residual add. One workgroup per row.

import type { Gpu } from "../device.ts";
import { type BoundKernel, type BufferArg, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import source from "../../../shaders/layer_norm.wgsl" with { type: "text" };

export interface LayerNormArgs {
  /** f32 [rows, D], normalised in place. */
  x: BufferArg;
  /** W [D] each. */
  gain: BufferArg;
  bias: BufferArg;
  D: number;
  eps: number;
}

const MAX_WORKGROUPS = 65535;

export function bindLayerNorm(gpu: Gpu, args: LayerNormArgs): BoundKernel {
  const { D, eps } = args;
  if (!Number.isInteger(D) || D < 1) throw new RangeError(`layerNorm: bad D ${D}`);
  if (!(eps > 0)) throw new RangeError(`layerNorm: bad eps ${eps}`);
  const pipeline = getPipeline(gpu, source, "main");
  const params = new ParamsUniform(gpu, [D, { f32: eps }]);
  const bindGroup = bindBuffers(gpu, pipeline, [params.buffer, args.x, args.gain, args.bias]);
  return {
    kind: "norm",
    encode(pass, rows) {
      if (rows <= 0) return;
      if (rows > MAX_WORKGROUPS) {
        throw new RangeError(`layerNorm: ${rows} rows exceed one dispatch`);
      }
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(rows);
    },
  };
}
