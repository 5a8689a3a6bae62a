// Binds shaders/quantize_x.wgsl: a matmul's activations x [rows, K] as int8 blocks of 32 with a
// scale and a sum each (GGML's Q8_1 in spirit), the input of the integer-dot matmul (matmul_int.ts).
// The RMSNorm before a projection is fused in here (`norm`), as the float matmuls fuse it into
// their x loads: x is normalized, then quantized, in one dispatch per step, whatever the number of
// row parts of the matrix that reads it.

import type { Gpu } from "../device.ts";
import { type BoundKernel, type BufferArg, ParamsUniform } from "../kernel.ts";
import { createStorage } from "../buffers.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import { checkNorm, type MatmulNorm } from "./fused_norm.ts";
import source from "../../../shaders/quantize_x.wgsl" with { type: "text" };

/** Values per activation block. */
export const X_BLOCK = 32;
const LANES = 64;
const MAX_WORKGROUPS = 65535;

/**
 * Quantized activations for up to `rows` rows of up to `K` values: `q` holds 8 u32 of packed int8
 * per block, `s` a (d, s) pair of f32 per block, s = d · Σq. Rows are laid out at the K of the
 * matrix that wrote them (row m's blocks from m · K / 32), so one scratch serves every width.
 */
export interface QuantizedX {
  q: GPUBuffer;
  s: GPUBuffer;
  /** The most rows × values it holds. */
  capacity: number;
}

/** Scratch for quantized activations of `values` values (rows × K) in all. */
export function createQuantizedX(gpu: Gpu, values: number, label = "quantized x"): QuantizedX {
  if (!Number.isInteger(values) || values < X_BLOCK || values % X_BLOCK !== 0) {
    throw new RangeError(`quantized x: ${values} values are not whole blocks of ${X_BLOCK}`);
  }
  return {
    q: createStorage(gpu, values, `${label} q`),
    s: createStorage(gpu, (values / X_BLOCK) * 8, `${label} s`),
    capacity: values,
  };
}

export function destroyQuantizedX(x: QuantizedX): void {
  x.q.destroy();
  x.s.destroy();
}

export interface QuantizeXArgs {
  /** f32 [rows, K]. */
  x: BufferArg;
  out: QuantizedX;
  K: number;
  /** Normalize x first: rmsnorm(x) · gain, quantized. */
  norm?: MatmulNorm;
}

export function bindQuantizeX(gpu: Gpu, args: QuantizeXArgs): BoundKernel {
  const { K, norm } = args;
  if (!Number.isInteger(K) || K < X_BLOCK || K % X_BLOCK !== 0) {
    throw new RangeError(`quantize_x: K=${K} is not whole blocks of ${X_BLOCK}`);
  }
  checkNorm("quantize_x", norm);
  const params = new ParamsUniform(gpu, [K, norm ? 1 : 0, { f32: norm?.eps ?? 0 }]);
  const pipeline = getPipeline(gpu, source, "quantizeX", { LANES });
  // Without a norm, x stands in for the gain's binding, never read.
  const gain = norm?.gain ?? args.x;
  const bindGroup = bindBuffers(gpu, pipeline, [
    params.buffer,
    args.x,
    gain,
    args.out.q,
    args.out.s,
  ]);
  return {
    encode(pass, rows) {
      if (rows <= 0) return;
      if (rows * K > args.out.capacity) {
        throw new RangeError(`quantize_x: ${rows} rows of ${K} exceed its scratch`);
      }
      if (rows > MAX_WORKGROUPS) {
        throw new RangeError(`quantize_x: ${rows} rows exceed one dispatch`);
      }
      params.setRows(rows);
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      pass.dispatchWorkgroups(rows);
    },
  };
}
