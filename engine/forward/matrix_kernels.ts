// The kernels that read a weight matrix: one per row part (a matrix larger than the binding limit
// is split, weights/model_weights.ts), each a float matmul or, for GGUF blocks, a dequantizing one,
// reading the part from a storage buffer or a weight texture as it was uploaded. A norm before the
// matrix is fused into every part's kernel: each part normalizes x itself (gpu/kernels/fused_norm.ts).
// Where the engine chose the integer-dot kernels for quantized matrices (quant_kernel_choice.ts),
// a quantized matrix is instead one quantize_x dispatch (the norm fused into it, once for all
// parts) into the step's quantized-x scratch, then each part's matmul_int reading it.

import type { Gpu } from "../gpu/device.ts";
import type { BoundKernel, KernelKind } from "../gpu/kernel.ts";
import { bindEmbedding, type EmbeddingArgs } from "../gpu/kernels/embedding.ts";
import { bindQuantEmbedding } from "../gpu/kernels/embedding_quant.ts";
import {
  bindMatmul,
  type GluActivation,
  type MatmulArgs,
  type MatmulMode,
} from "../gpu/kernels/matmul.ts";
import { bindQuantMatmul } from "../gpu/kernels/matmul_quant.ts";
import { bindIntMatmul } from "../gpu/kernels/matmul_int.ts";
import { bindQuantizeX, type QuantizedX } from "../gpu/kernels/quantize_x.ts";
import type { MatmulNorm } from "../gpu/kernels/fused_norm.ts";
import { isQuantType, type QuantType } from "../quant/formats.ts";
import type { GluMatrix, GpuMatrix } from "../weights/model_weights.ts";

/** The embedding's row parts, each gathering the rows whose token ids it holds. */
export function embeddingParts(
  gpu: Gpu,
  m: GpuMatrix,
  args: Omit<EmbeddingArgs, "table" | "rowStart" | "rowCount">,
): BoundKernel[] {
  return m.parts.map((part) => {
    const partArgs = { ...args, rowStart: part.rowStart, rowCount: part.rows };
    // A quantized table (GGUF) is gathered and dequantized row by row.
    const format = part.format ?? m.format;
    const table = part.buffer ?? part.texture;
    const kernel = format && isQuantType(format)
      ? bindQuantEmbedding(gpu, { ...partArgs, table, type: format })
      : bindEmbedding(gpu, { ...partArgs, table });
    return { ...kernel, kind: "embedding" };
  });
}

/**
 * y = x · Wᵀ ("store"), or y += x · Wᵀ ("add"): each part writes its own columns of y. `kind`
 * labels them for bench step-split (the LM head is told apart from the layers' weights). With
 * `norm`, x is RMS-normalized first: y = rmsnorm(x) · Wᵀ.
 */
export function matmulParts(
  gpu: Gpu,
  m: GpuMatrix,
  x: GPUBuffer,
  y: GPUBuffer,
  mode: "store" | "add",
  kind: KernelKind = "weights",
  norm?: MatmulNorm,
  intX?: QuantizedX,
): BoundKernel[] {
  return partKernels(gpu, m, m.rows, x, y, mode, norm, undefined, intX)
    .map((k) => ({ ...k, kind }));
}

/**
 * y = act(x · Wgateᵀ) * (x · Wupᵀ), act SiLU or GELU-tanh: each part holds its rows of gate and of
 * up. With `norm`, x is RMS-normalized first.
 */
export function gluParts(
  gpu: Gpu,
  m: GluMatrix,
  x: GPUBuffer,
  y: GPUBuffer,
  norm: MatmulNorm | undefined,
  activation: GluActivation,
  intX?: QuantizedX,
): BoundKernel[] {
  return partKernels(gpu, m, m.intermediate, x, y, "glu", norm, activation, intX)
    .map((k) => ({ ...k, kind: "weights" }));
}

/**
 * One kernel per part of `m` (y has `ldy` columns): a quantized matrix dequantizes in its kernel,
 * any other takes the weight-dtype matmul. With `intX` (the integer-dot kernels chosen), a matrix
 * whose parts are all quantized is quantize_x into intX and then matmul_int per part, unless its
 * glu is GeGLU (matmul_int has SwiGLU only): that one keeps the float kernels.
 */
function partKernels(
  gpu: Gpu,
  m: GpuMatrix | GluMatrix,
  ldy: number,
  x: GPUBuffer,
  y: GPUBuffer,
  mode: MatmulMode,
  norm: MatmulNorm | undefined,
  activation?: GluActivation,
  intX?: QuantizedX,
): BoundKernel[] {
  const formatOf = (p: (typeof m.parts)[number]) => p.format ?? m.format;
  const allQuantized = m.parts.every((p) => {
    const f = formatOf(p);
    return f !== undefined && isQuantType(f);
  });
  if (intX && allQuantized && (activation ?? "silu") === "silu") {
    const quantize = bindQuantizeX(gpu, { x, out: intX, K: m.cols, norm });
    return [
      quantize,
      ...m.parts.map((p) =>
        bindIntMatmul(gpu, {
          x: intX,
          w: p.buffer ?? p.texture,
          y,
          K: m.cols,
          N: p.rows,
          ldy,
          yCol: p.rowStart,
          mode,
          type: formatOf(p) as QuantType,
        })
      ),
    ];
  }
  return m.parts.map((p) => {
    const args: MatmulArgs = {
      x,
      w: p.buffer ?? p.texture,
      y,
      K: m.cols,
      N: p.rows,
      ldy,
      yCol: p.rowStart,
      mode,
      norm,
      activation,
    };
    // A part may have its own format (a fused matrix of GGUF tensors of different types).
    const format = p.format ?? m.format;
    return format && isQuantType(format)
      ? bindQuantMatmul(gpu, { ...args, type: format })
      : bindMatmul(gpu, args);
  });
}
