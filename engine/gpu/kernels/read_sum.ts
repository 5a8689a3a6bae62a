// Binds shaders/read_sum.wgsl: a wrapping u32 sum of a buffer, one total per lane. The read
// bandwidth baseline of bench/kernels.ts; the totals only keep the reads from being optimized away.
// bindReadSumTexture sums the same bytes held in a texture (shaders/read_sum_texture.wgsl): on
// llvmpipe texel fetches read about 10x faster than storage loads.

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import type { BufferArg } from "../kernel.ts";
import source from "../../../shaders/read_sum.wgsl" with { type: "text" };
import textureSource from "../../../shaders/read_sum_texture.wgsl" with { type: "text" };

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

// ---- the same sum through the sampler (shaders/read_sum_texture.wgsl) ------------------------------

/** Texels per row of a read-sum texture: 64 KiB of rgba32uint, a multiple of LANES * PER_LANE. */
export const READ_SUM_TEXTURE_WIDTH = 4096;

/** An rgba32uint texture holding `bytes` (a whole number of its 64 KiB rows) for bindReadSumTexture. */
export function createReadSumTexture(gpu: Gpu, bytes: number): GPUTexture {
  const rowBytes = READ_SUM_TEXTURE_WIDTH * 16;
  if (!Number.isInteger(bytes / rowBytes) || bytes <= 0) {
    throw new RangeError(
      `read_sum_texture: ${bytes} bytes is not a positive multiple of ${rowBytes}`,
    );
  }
  return gpu.device.createTexture({
    size: [READ_SUM_TEXTURE_WIDTH, bytes / rowBytes],
    format: "rgba32uint",
    usage: GPUTextureUsage.TEXTURE_BINDING | GPUTextureUsage.COPY_DST,
  });
}

/** The totals a texture sum of `bytes` writes (one per lane). */
export function readSumTextureTotals(bytes: number): number {
  return readSumGroups(bytes) * LANES;
}

/** Sums every texel of `texture` (made by createReadSumTexture), one total per lane. */
export function bindReadSumTexture(
  gpu: Gpu,
  args: { texture: GPUTexture; totals: BufferArg },
): BoundKernel {
  const bytes = args.texture.width * args.texture.height * 16;
  if (args.texture.width !== READ_SUM_TEXTURE_WIDTH || args.texture.format !== "rgba32uint") {
    throw new RangeError("read_sum_texture: not a createReadSumTexture texture");
  }
  const groups = readSumGroups(bytes);
  if (groups > MAX_WORKGROUPS) {
    throw new RangeError(`read_sum_texture: ${bytes} bytes exceed one dispatch`);
  }
  const pipeline = getPipeline(gpu, textureSource, "main", {
    PER_LANE,
    WIDTH: READ_SUM_TEXTURE_WIDTH,
  });
  const bindGroup = gpu.device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: [
      { binding: 0, resource: args.texture.createView() },
      {
        binding: 1,
        resource: args.totals instanceof GPUBuffer ? { buffer: args.totals } : args.totals,
      },
    ],
  });
  return {
    /** `rows` is ignored: the size was fixed at bind time. */
    encode(pass, _rows) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(groups);
    },
  };
}
