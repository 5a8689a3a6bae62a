// Which matmul kernel a model's float matrices get on this adapter: weights read from storage
// buffers or from textures (engine/gpu/weight_texture.ts). The fastest differs by adapter: on
// llvmpipe a storage load is a stalled stack store and reload and texel fetches read the same bytes
// several times faster, while a GPU may favour either. So `auto` times both kernels once, at first
// start, on the model's own matrix shapes and formats (a GGUF model's quantized kernels), and
// caches the winner on disk per adapter and shape; later starts read it back. `storage` or
// `texture` forces one (tests, A/B).

import { join } from "node:path";
import type { Gpu } from "../gpu/device.ts";
import { createStorage, writeBytes } from "../gpu/buffers.ts";
import { bindMatmul, type MatmulMode, matmulVectorShape } from "../gpu/kernels/matmul.ts";
import { bindQuantMatmul, createMatmulX } from "../gpu/kernels/matmul_quant.ts";
import { quantLayout } from "../gpu/kernels/quant_layout.ts";
import type { BoundKernel } from "../gpu/kernel.ts";
import { isQuantType, type QuantType } from "../quant/formats.ts";
import type { GluMatrix, GpuMatrix, ModelWeights } from "../weights/model_weights.ts";
import {
  createWeightTexture,
  type WeightLayout,
  writeTextureBytes,
} from "../gpu/weight_texture.ts";
import type { LlamaConfig } from "../model/config.ts";
import { sluiceCacheDir } from "../util/cache_dir.ts";
import matmulSource from "../../shaders/matmul.wgsl" with { type: "text" };
import matmulQuantSource from "../../shaders/matmul_quant.wgsl" with { type: "text" };
import quantBlocksSource from "../../shaders/quant_blocks.wgsl" with { type: "text" };
import activationsSource from "../../shaders/activations.wgsl" with { type: "text" };

/**
 * A digest of the matmul shaders' sources: part of the cache key, so a choice measured on other
 * kernels (an older Sluice) is measured again rather than trusted.
 */
const KERNELS_VERSION = fnv1a(
  matmulSource + matmulQuantSource + quantBlocksSource + activationsSource,
);

/** FNV-1a of `text`, 8 hex digits: the kernel choices' cache keys hash shader sources with it. */
export function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16).padStart(8, "0");
}

/** --matmul-kernel: measure and cache (auto), or a fixed layout. */
export type MatmulKernelFlag = "auto" | WeightLayout;

export const MATMUL_KERNEL_FLAGS: readonly MatmulKernelFlag[] = ["auto", "storage", "texture"];

/** One matrix the forward pass multiplies by, `count` times per token. */
export interface CalibrationShape {
  K: number;
  N: number;
  mode: MatmulMode;
  count: number;
  /** A quantized matrix's blocks; absent: the adapter's float weight dtype. */
  format?: QuantType;
}

/** What a calibration found: microseconds per token of each layout's matvecs, and the winner. */
export interface MatmulChoice {
  layout: WeightLayout;
  /** Absent when the layout was forced or read from the cache without a measurement. */
  usPerToken?: Record<WeightLayout, number>;
  /** Where the choice came from. */
  source: "flag" | "cache" | "measured";
}

export interface ChooseOptions {
  flag: MatmulKernelFlag;
  /** Directory of the choice cache (default: the Sluice cache's kernels/). */
  cacheDir?: string;
  /** The timing (tests replace it); default: the kernels on random weights of each shape. */
  measure?: (gpu: Gpu, shapes: CalibrationShape[]) => Promise<Record<WeightLayout, number>>;
}

/** The float matrices of one token's forward pass. */
export function calibrationShapes(cfg: LlamaConfig): CalibrationShape[] {
  const h = cfg.hiddenSize, L = cfg.numLayers, q = cfg.numHeads * cfg.headDim;
  return [
    { K: h, N: q + 2 * cfg.numKvHeads * cfg.headDim, mode: "store", count: L },
    { K: q, N: h, mode: "add", count: L },
    { K: h, N: cfg.intermediateSize, mode: "glu", count: L },
    { K: cfg.intermediateSize, N: h, mode: "add", count: L },
    { K: h, N: cfg.vocabSize, mode: "store", count: 1 },
  ];
}

/** The matrices of one token's forward pass as loaded: their shapes and formats (GGUF). */
export function loadedShapes(w: ModelWeights): CalibrationShape[] {
  const L = w.layers.length, layer = w.layers[0];
  const shape = (m: GpuMatrix | GluMatrix, mode: MatmulMode, count: number): CalibrationShape => {
    // A fused matrix of GGUF tensors of different types names no format of its own: its first
    // part's stands for it.
    const format = m.format ?? m.parts[0]?.format;
    return {
      K: m.cols,
      N: "rows" in m ? m.rows : m.intermediate,
      mode,
      count,
      ...(format && isQuantType(format) ? { format } : {}),
    };
  };
  return [
    shape(layer.qkv, "store", L),
    shape(layer.o, "add", L),
    shape(layer.gateUp, "glu", L),
    shape(layer.down, "add", L),
    shape(w.lmHead, "store", 1),
  ];
}

/** The layout for matrices of these shapes on `gpu`, by the flag, the cache or a measurement. */
export async function chooseMatmulLayout(
  gpu: Gpu,
  shapes: CalibrationShape[],
  options: ChooseOptions,
): Promise<MatmulChoice> {
  if (options.flag !== "auto") return { layout: options.flag, source: "flag" };
  const key = [
    gpu.adapterId ?? gpu.adapterName,
    gpu.f16 ? "f16" : "f32",
    `kernels ${KERNELS_VERSION}`,
    ...shapes.map((s) => `${s.K}x${s.N}${s.mode}*${s.count}${s.format ? ` ${s.format}` : ""}`),
  ].join(" | ");
  const file = join(options.cacheDir ?? join(sluiceCacheDir(), "kernels"), "matmul.json");
  const cache = await readCache(file);
  const cached = cache[key];
  if (cached && (cached.layout === "storage" || cached.layout === "texture")) {
    return { layout: cached.layout, usPerToken: cached.usPerToken, source: "cache" };
  }
  const usPerToken = await (options.measure ?? measureLayouts)(gpu, shapes);
  const layout: WeightLayout = usPerToken.texture < usPerToken.storage ? "texture" : "storage";
  // Re-read just before writing, so a choice another process cached meanwhile is kept.
  await writeCache(file, { ...await readCache(file), [key]: { layout, usPerToken } });
  return { layout, usPerToken, source: "measured" };
}

type CacheEntry = { layout: WeightLayout; usPerToken?: Record<WeightLayout, number> };

/** The cache's entries (quant_kernel_choice.ts keeps its own file); a missing or unreadable file is an empty cache (measured again). */
export async function readCache<T = CacheEntry>(file: string): Promise<Record<string, T>> {
  try {
    const parsed = JSON.parse(await Deno.readTextFile(file));
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

/** Writes the cache through a temporary file and a rename, so no reader sees half of it. */
export async function writeCache<T>(file: string, cache: Record<string, T>): Promise<void> {
  const dir = join(file, "..");
  await Deno.mkdir(dir, { recursive: true });
  const tmp = await Deno.makeTempFile({ dir, prefix: "matmul-", suffix: ".tmp" });
  try {
    await Deno.writeTextFile(tmp, JSON.stringify(cache, null, 2) + "\n");
    await Deno.rename(tmp, file);
  } catch (e) {
    await Deno.remove(tmp).catch(() => {});
    throw e;
  }
}

/**
 * Rows a calibration matrix is cut to: the per-row cost of a matvec is flat in N, so the LM head's
 * 49k+ rows are timed on a slice and scaled, keeping first start short and its memory small.
 */
const MAX_CALIBRATION_ROWS = 4096;
/** Dispatches per timed submit (the slope between n and 3n cancels the submit's round trip). */
const DISPATCHES = 4;
const TRIALS = 3;

/**
 * µs per token of all shapes' one-row matvecs, each layout's kernel on random f16/f32 weights of
 * the shape, the two layouts' trials interleaved so drifting load hits both alike. A shape the
 * texture kernel cannot take (off its vector path) stays in storage and counts the same for both.
 */
export async function measureLayouts(
  gpu: Gpu,
  shapes: CalibrationShape[],
): Promise<Record<WeightLayout, number>> {
  const total = { storage: 0, texture: 0 };
  for (const shape of shapes) {
    const { format } = shape;
    const N = Math.min(shape.N, MAX_CALIBRATION_ROWS);
    const scale = (shape.count * shape.N) / N;
    const weightRows = (shape.mode === "glu" ? 2 : 1) * N;
    // Random f16 halves are valid blocks of every format too (finite scales, any quants).
    const bytes = format
      ? quantLayout(format, weightRows, shape.K).bytes
      : weightRows * shape.K * (gpu.f16 ? 2 : 4);
    const data = randomHalves(Math.ceil(bytes / 2));
    const buffer = createStorage(gpu, bytes, "calibration");
    writeBytes(gpu, buffer, 0, data);
    const texture = format || matmulVectorShape(shape.K, N)
      ? createWeightTexture(gpu, bytes)
      : null;
    if (texture) writeTextureBytes(gpu, texture, 0, data);
    const x = createMatmulX(gpu, shape.K * 4, "calibration x");
    const y = createStorage(gpu, N * 4, "calibration y");
    const args = { x, y, K: shape.K, N, mode: shape.mode };
    const bind = (w: GPUBuffer | GPUTexture): BoundKernel =>
      format ? bindQuantMatmul(gpu, { ...args, w, type: format }) : bindMatmul(gpu, { ...args, w });
    const kernels = { storage: bind(buffer), texture: bind(texture ?? buffer) };
    const samples: Record<WeightLayout, number[]> = { storage: [], texture: [] };
    for (const layout of ["storage", "texture"] as const) {
      await submitMs(gpu, kernels[layout], 1); // the first dispatch compiles the pipeline
    }
    for (let trial = 0; trial < TRIALS; trial++) {
      for (const layout of ["storage", "texture"] as const) {
        const one = await submitMs(gpu, kernels[layout], DISPATCHES);
        const three = await submitMs(gpu, kernels[layout], 3 * DISPATCHES);
        samples[layout].push(Math.max(0, (three - one) / (2 * DISPATCHES)));
      }
    }
    for (const layout of ["storage", "texture"] as const) {
      total[layout] += median(samples[layout]) * 1000 * scale;
    }
    buffer.destroy();
    texture?.destroy();
    x.destroy();
    y.destroy();
  }
  return total;
}

export async function submitMs(
  gpu: Gpu,
  kernel: BoundKernel,
  dispatches: number,
): Promise<number> {
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  for (let i = 0; i < dispatches; i++) kernel.encode(pass, 1);
  pass.end();
  const commands = encoder.finish();
  const t0 = performance.now();
  gpu.device.queue.submit([commands]);
  await gpu.device.queue.onSubmittedWorkDone();
  return performance.now() - t0;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

/**
 * f16 halves in ±[0.5, 1) (read as f32 pairs: finite values too; as GGUF blocks: finite scales,
 * any quants): no zeros to flatter a kernel. The same sequence every call (bench kernels uses it too).
 */
export function randomHalves(count: number): Uint16Array {
  const halves = new Uint16Array(Math.ceil(count / 2) * 2);
  let state = 0x2545f491;
  for (let i = 0; i < halves.length; i++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    halves[i] = (state & 0x83ff) | 0x3800;
  }
  return halves;
}
