// Which kernel multiplies a GGUF model's quantized matrices on this adapter: the float one
// (matmul_quant.ts: dequantize each weight to f32 and fma) or the integer-dot one (quantize_x.ts
// then matmul_int.ts: x rounded to int8 blocks, four products per dot4I8Packed). The integer path
// needs WGSL's packed_4x8_integer_dot_product, and where the adapter has it, whether it wins
// depends on the adapter (an emulated dot4 may lose), so `auto` times both once, at first start,
// on the model's own quantized shapes in the weight layout matmul_choice.ts chose (on lavapipe the
// float kernel reading textures is about 3× the int pair, which wins from storage), and caches the
// winner per adapter, layout and shape as matmul_choice.ts does for storage vs texture. `float` or `int` forces one (tests, A/B); `int`
// on a runtime without the feature is an error, not a silent fallback.

import { join } from "node:path";
import type { Gpu } from "../gpu/device.ts";
import { createStorage, writeBytes } from "../gpu/buffers.ts";
import type { BoundKernel } from "../gpu/kernel.ts";
import { bindQuantMatmul, createMatmulX } from "../gpu/kernels/matmul_quant.ts";
import { bindIntMatmul, hasIntDot, INT_DOT_FEATURE } from "../gpu/kernels/matmul_int.ts";
import { bindQuantizeX, createQuantizedX, destroyQuantizedX } from "../gpu/kernels/quantize_x.ts";
import { quantLayout } from "../gpu/kernels/quant_layout.ts";
import { sluiceCacheDir } from "../util/cache_dir.ts";
import {
  createWeightTexture,
  type WeightLayout,
  writeTextureBytes,
} from "../gpu/weight_texture.ts";
import {
  type CalibrationShape,
  fnv1a,
  median,
  randomHalves,
  readCache,
  submitMs,
  writeCache,
} from "./matmul_choice.ts";
import matmulQuantSource from "../../shaders/matmul_quant.wgsl" with { type: "text" };
import matmulIntSource from "../../shaders/matmul_int.wgsl" with { type: "text" };
import quantizeXSource from "../../shaders/quantize_x.wgsl" with { type: "text" };
import quantBlocksSource from "../../shaders/quant_blocks.wgsl" with { type: "text" };
import activationsSource from "../../shaders/activations.wgsl" with { type: "text" };

/** The kernel family for quantized matrices. */
export type QuantKernels = "float" | "int";

/** --quant-kernels: measure and cache (auto), or a fixed family. */
export type QuantKernelFlag = "auto" | QuantKernels;

export const QUANT_KERNEL_FLAGS: readonly QuantKernelFlag[] = ["auto", "float", "int"];

export interface QuantKernelChoice {
  kernels: QuantKernels;
  /** µs per token of each family's matvecs, where measured (or cached from a measurement). */
  usPerToken?: Record<QuantKernels, number>;
  /** flag, cache or measured; "unsupported": no integer dot here; "none": no quantized matrix. */
  source: "flag" | "cache" | "measured" | "unsupported" | "none";
}

export interface QuantChooseOptions {
  flag: QuantKernelFlag;
  /**
   * Where the weights live (matmul_choice.ts chose it first): both families are timed reading that
   * layout, since a float kernel reading textures may beat an int one that wins from storage.
   */
  layout?: WeightLayout;
  /** Directory of the choice cache (default: the Sluice cache's kernels/). */
  cacheDir?: string;
  /** The timing (tests replace it); default: both families on random blocks of each shape. */
  measure?: (
    gpu: Gpu,
    shapes: CalibrationShape[],
    layout: WeightLayout,
  ) => Promise<Record<QuantKernels, number>>;
}

/** A digest of the kernels' sources: a choice measured on other kernels is measured again. */
const KERNELS_VERSION = fnv1a(
  matmulQuantSource + matmulIntSource + quantizeXSource + quantBlocksSource + activationsSource,
);

/** The family for the quantized ones among `shapes` (loadedShapes), by flag, cache or timing. */
export async function chooseQuantKernels(
  gpu: Gpu,
  shapes: CalibrationShape[],
  options: QuantChooseOptions,
): Promise<QuantKernelChoice> {
  if (options.flag === "int" && !hasIntDot()) {
    throw new Error(`--quant-kernels int: this runtime's WGSL lacks ${INT_DOT_FEATURE}`);
  }
  if (options.flag !== "auto") return { kernels: options.flag, source: "flag" };
  const quantized = shapes.filter((s) => s.format);
  if (quantized.length === 0) return { kernels: "float", source: "none" };
  if (!hasIntDot()) return { kernels: "float", source: "unsupported" };
  const layout = options.layout ?? "storage";
  const key = [
    gpu.adapterId ?? gpu.adapterName,
    gpu.f16 ? "f16" : "f32",
    `kernels ${KERNELS_VERSION}`,
    `weights in ${layout}`,
    ...quantized.map((s) => `${s.K}x${s.N}${s.mode}*${s.count} ${s.format}`),
  ].join(" | ");
  const file = join(options.cacheDir ?? join(sluiceCacheDir(), "kernels"), "quant.json");
  type Entry = { kernels: QuantKernels; usPerToken?: Record<QuantKernels, number> };
  const cached = (await readCache<Entry>(file))[key];
  if (cached && (cached.kernels === "float" || cached.kernels === "int")) {
    return { kernels: cached.kernels, usPerToken: cached.usPerToken, source: "cache" };
  }
  const usPerToken = await (options.measure ?? measureQuantKernels)(gpu, quantized, layout);
  const kernels: QuantKernels = usPerToken.int < usPerToken.float ? "int" : "float";
  await writeCache(file, { ...await readCache<Entry>(file), [key]: { kernels, usPerToken } });
  return { kernels, usPerToken, source: "measured" };
}

/** Rows a calibration matrix is cut to (the per-row cost of a matvec is flat in N). */
const MAX_CALIBRATION_ROWS = 4096;
const DISPATCHES = 4;
const TRIALS = 3;

/**
 * µs per token of the quantized shapes' one-row matvecs, each family on the same random blocks in
 * `layout` (the int family's quantize_x dispatch counted in), trials interleaved as in
 * matmul_choice.ts.
 */
export async function measureQuantKernels(
  gpu: Gpu,
  shapes: CalibrationShape[],
  layout: WeightLayout = "storage",
): Promise<Record<QuantKernels, number>> {
  const total = { float: 0, int: 0 };
  for (const shape of shapes) {
    const format = shape.format;
    if (!format) continue;
    const N = Math.min(shape.N, MAX_CALIBRATION_ROWS);
    const scale = (shape.count * shape.N) / N;
    const weightRows = (shape.mode === "glu" ? 2 : 1) * N;
    const bytes = quantLayout(format, weightRows, shape.K).bytes;
    const data = randomHalves(Math.ceil(bytes / 2));
    let w: GPUBuffer | GPUTexture;
    if (layout === "texture") {
      w = createWeightTexture(gpu, bytes);
      writeTextureBytes(gpu, w, 0, data);
    } else {
      w = createStorage(gpu, bytes, "calibration");
      writeBytes(gpu, w, 0, data);
    }
    const x = createMatmulX(gpu, shape.K * 4, "calibration x");
    const xq = createQuantizedX(gpu, shape.K, "calibration xq");
    const y = createStorage(gpu, N * 4, "calibration y");
    const args = { x, y, K: shape.K, N, mode: shape.mode, w, type: format };
    const quantize = bindQuantizeX(gpu, { x, out: xq, K: shape.K });
    const int = bindIntMatmul(gpu, { ...args, x: xq });
    const kernels: Record<QuantKernels, BoundKernel> = {
      float: bindQuantMatmul(gpu, args),
      int: {
        encode(pass, rows) {
          quantize.encode(pass, rows);
          int.encode(pass, rows);
        },
      },
    };
    const samples: Record<QuantKernels, number[]> = { float: [], int: [] };
    for (const family of ["float", "int"] as const) await submitMs(gpu, kernels[family], 1);
    for (let trial = 0; trial < TRIALS; trial++) {
      for (const family of ["float", "int"] as const) {
        const one = await submitMs(gpu, kernels[family], DISPATCHES);
        const three = await submitMs(gpu, kernels[family], 3 * DISPATCHES);
        samples[family].push(Math.max(0, (three - one) / (2 * DISPATCHES)));
      }
    }
    for (const family of ["float", "int"] as const) {
      total[family] += median(samples[family]) * 1000 * scale;
    }
    w.destroy();
    x.destroy();
    y.destroy();
    destroyQuantizedX(xq);
  }
  return total;
}
