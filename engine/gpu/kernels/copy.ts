// Binds shaders/copy.wgsl: a compute-shader copy of a fixed byte count (the bandwidth baseline).

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import type { BufferArg } from "../kernel.ts";
import source from "../../../shaders/copy.wgsl" with { type: "text" };

export interface CopyArgs {
  src: BufferArg;
  dst: BufferArg;
  /** Bytes to copy from the start of src to the start of dst; a multiple of 16. */
  bytes: number;
}

/** Lanes per workgroup (matches LANES in the shader). */
const LANES = 256;
const MAX_WORKGROUPS = 65535;

export function bindCopy(gpu: Gpu, args: CopyArgs): BoundKernel {
  const { bytes } = args;
  if (!Number.isInteger(bytes) || bytes < 16 || bytes % 16 !== 0) {
    throw new RangeError(`copy: ${bytes} bytes is not a positive multiple of 16`);
  }
  const words = bytes / 16;
  const pipeline = getPipeline(gpu, source, "main");
  const params = new ParamsUniform(gpu, [words]);
  const bindGroup = bindBuffers(gpu, pipeline, [params.buffer, args.src, args.dst]);
  const groups = Math.ceil(words / LANES);
  const gx = Math.min(groups, MAX_WORKGROUPS);
  const gy = Math.ceil(groups / gx);
  if (gy > MAX_WORKGROUPS) throw new RangeError(`copy: ${bytes} bytes exceed one dispatch`);
  return {
    /** `rows` is ignored: the size was fixed at bind time. */
    encode(pass, _rows) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(gx, gy);
    },
  };
}
