// Binds shaders/read_sum.wgsl: a wrapping u32 sum of a buffer, one total per lane. The read
// bandwidth baseline of bench/kernels.ts; the totals only keep the reads from being optimized away.

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import type { BufferArg } from "../kernel.ts";
import source from "../../../shaders/read_sum.wgsl" with { type: "text" };

export interface ReadSumArgs {
  src: BufferArg;
  /** Bytes summed from the start of src; a multiple of 16. */
  bytes: number;
  /** u32 [readSumTotals(bytes)]: one total per lane. */
  totals: BufferArg;
}

const LANES = 256;
/** vec4 words per lane: one step of four loads. Longer ranges (8 to 64) read slower on llvmpipe. */
const PER_LANE = 4;
const MAX_WORKGROUPS = 65535;

function readSumGroups(bytes: number): number {
  return Math.ceil(bytes / 16 / (LANES * PER_LANE));
}

/** The totals a sum of `bytes` writes (one per lane). */
export function readSumTotals(bytes: number): number {
  return readSumGroups(bytes) * LANES;
}

export function bindReadSum(gpu: Gpu, args: ReadSumArgs): BoundKernel {
  const { bytes } = args;
  if (!Number.isInteger(bytes) || bytes < 16 || bytes % 16 !== 0) {
    throw new RangeError(`read_sum: ${bytes} bytes is not a positive multiple of 16`);
  }
  const groups = readSumGroups(bytes);
  if (groups > MAX_WORKGROUPS) throw new RangeError(`read_sum: ${bytes} bytes exceed one dispatch`);
  const pipeline = getPipeline(gpu, source, "main", { PER_LANE });
  const params = new ParamsUniform(gpu, [bytes / 16]);
  const bindGroup = bindBuffers(gpu, pipeline, [params.buffer, args.src, args.totals]);
  return {
    /** `rows` is ignored: the size was fixed at bind time. */
    encode(pass, _rows) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(groups);
    },
  };
}
