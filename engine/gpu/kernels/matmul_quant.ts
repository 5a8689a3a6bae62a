// Binds shaders/matmul_quant.wgsl: y = x · Wᵀ with W block-quantized (store, add or SwiGLU), the
// quantized twin of matmul.ts, taking the same arguments plus the format.
//
// W is one part in quant_layout.ts's layout: N rows (2N for glu: gate rows, then up rows) of K
// values. As in matmul.ts, one pipeline per row-tile height, built on first use, and encode picks
// the smallest tile that covers the batch.
//
// x is read through a uniform binding when the x buffer allows it (STORAGE_UNIFORM and at least
// uniformXBytes long, as the engine's activations are) and the step's rows fit the uniform binding
// limit (64 KiB: 28 rows of 576, 10 of 1536); otherwise through a storage binding. The two read
// the same values into the same arithmetic, so the results are the same bits. On llvmpipe the uniform path is 1.5-3x faster at
// one row: a storage load is a per-lane loop through the stack, a uniform one an AVX2 gather.
//
// W may also be a weight texture holding the part's bytes (engine/gpu/weight_texture.ts): the same
// shader with quant_blocks.wgsl's word loads turned into texel fetches, so the same bits.
//
// An RMSNorm may be fused into the x loads (`norm`, as in matmul.ts; fused_norm.ts). Like store and
// add, with and without it share a pipeline (the shader reads which from its params): q/k/v (store,
// normed) and o (add, not) of one format then compile one tile, not two; without a norm, x's
// buffer stands in for the gain's binding, never read.

import type { Gpu } from "../device.ts";
import { type BoundKernel, type BufferArg, ParamsUniform } from "../kernel.ts";
import { createStorage, STORAGE_UNIFORM } from "../buffers.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import {
  type MatmulArgs,
  type MatmulMode,
  type MatmulTile,
  tileFirstRow,
  unrollTile,
} from "./matmul.ts";
import { FORMAT_CODES, quantLayout, qVec4PerBlock } from "./quant_layout.ts";
import { textureWordsSource } from "../weight_texture.ts";
import { checkNorm } from "./fused_norm.ts";
import { QUANT_FORMATS, type QuantType } from "../../quant/formats.ts";
import blocks from "../../../shaders/quant_blocks.wgsl" with { type: "text" };
import matmulQuant from "../../../shaders/matmul_quant.wgsl" with { type: "text" };
import activations from "../../../shaders/activations.wgsl" with { type: "text" };

const source = blocks + matmulQuant + activations;

export interface QuantMatmulArgs extends MatmulArgs {
  type: QuantType;
}

const LANES = 8;
const MAX_WORKGROUPS = 65535;
/** Store and add share a pipeline (the shader reads which from its params); glu is its own. */
const MODE_CODES: Record<MatmulMode, number> = { store: 0, add: 0, glu: 2 };

/** A register tile (see matmul.ts), with its outputs per lane where x is read from storage. */
export interface QuantMatmulTile extends MatmulTile {
  storageOuts: number;
}

/**
 * Register tiles by batch size, measured on llvmpipe (interleaved A/B runs). Through a uniform
 * binding x is cheap and the outputs per lane matter little (16 rows: 24 outputs 1.14x of 4, 36
 * 0.92x). Through storage, every lane loads all of the tile's x (16 rows x 32 values per chunk,
 * each load a per-lane loop), so the 16-row tile (decode batches of 1536-wide rows, prefill) needs
 * more outputs to share it: K=1536, 16 rows: 16 outputs 2.9x faster than 4. More would be faster
 * still (36: 1.9x of 16) but llvmpipe's cold JIT of the tile grows with it (Q6_K add: 7 s at 4
 * outputs, 32 s at 16, 76 s at 24, 138 s at 36) and the engine's warm-up compiles it at load.
 */
export const QUANT_MATMUL_TILES: readonly QuantMatmulTile[] = [
  { rows: 1, outs: 8, storageOuts: 8 },
  { rows: 4, outs: 8, storageOuts: 8 },
  { rows: 16, outs: 4, storageOuts: 16 },
];

export function bindQuantMatmul(gpu: Gpu, args: QuantMatmulArgs): BoundKernel {
  const { K, N, mode, type } = args;
  const ldy = args.ldy ?? N;
  const yCol = args.yCol ?? 0;
  for (const [name, v] of Object.entries({ K, N, ldy, yCol })) {
    if (!Number.isInteger(v) || v < (name === "yCol" ? 0 : 1)) {
      throw new RangeError(`matmul_quant: bad ${name} ${v}`);
    }
  }
  if (!(type in FORMAT_CODES)) throw new RangeError(`matmul_quant: unknown type ${type}`);
  if (yCol + N > ldy) throw new RangeError(`matmul_quant: columns ${yCol}+${N} exceed ldy ${ldy}`);
  if (!(mode in MODE_CODES)) throw new RangeError(`matmul_quant: unknown mode ${mode}`);
  checkNorm("matmul_quant", args.norm);
  const norm = args.norm;
  const format = QUANT_FORMATS[type];
  const layout = quantLayout(type, mode === "glu" ? 2 * N : N, K); // throws on a partial block
  const params = new ParamsUniform(gpu, [
    K,
    N,
    ldy,
    yCol,
    layout.sOffset / 16,
    layout.dOffset / 4,
    layout.hOffset / 4,
    mode === "add" ? 1 : 0,
    norm ? 1 : 0,
    { f32: norm?.eps ?? 0 },
    args.activation === "gelu_tanh" ? 1 : 0,
  ]);
  const groupsOf = (outs: number) => Math.ceil(N / (LANES * outs));
  for (const tile of QUANT_MATMUL_TILES) {
    const groups = groupsOf(outsOf(Math.min(tile.outs, tile.storageOuts), mode));
    if (groups > MAX_WORKGROUPS) {
      throw new RangeError(`matmul_quant: N=${N} needs ${groups} workgroups`);
    }
  }
  const xUniform = uniformX(gpu, args.x, K);
  const texture = args.w instanceof GPUTexture;
  const weightsSource = texture
    ? textureWordsSource(textureWordsSource(source, "wq"), "wd")
    : source;
  const gain = norm?.gain ?? (args.x instanceof GPUBuffer ? args.x : args.x.buffer);
  type Built = { groups: number; pipeline: GPUComputePipeline; bindGroup: GPUBindGroup };
  const built = new Map<string, Built>();
  const variant = (i: number, uniform: boolean) => {
    const key = `${i}:${uniform}`;
    const ready = built.get(key);
    if (ready) return ready;
    const tile = QUANT_MATMUL_TILES[i];
    const outs = outsOf(uniform ? tile.outs : tile.storageOuts, mode);
    const code = uniform
      ? withUniformX(weightsSource, xUniform!.binding.size! / 16)
      : weightsSource;
    const pipeline = getPipeline(gpu, unrollTile(code, tile.rows, outs), "matmulQuant", {
      LANES,
      TILE_ROWS: tile.rows,
      OUTS: outs,
      MODE: MODE_CODES[mode],
      FMT: FORMAT_CODES[type],
      BLOCK: format.blockElems,
      CHUNKS: format.blockElems / 32,
      Q_VEC4: qVec4PerBlock(type),
      W_F16: gpu.f16 ? 1 : 0,
    });
    const x = uniform ? xUniform!.binding : args.x;
    const bindGroup = bindBuffers(gpu, pipeline, [
      params.buffer,
      x,
      args.w,
      args.w,
      args.y,
      gain,
    ]);
    const v = { groups: groupsOf(outs), pipeline, bindGroup };
    built.set(key, v);
    return v;
  };

  return {
    variantRows: quantVariantRows(xUniform?.rows ?? 0),
    encode(pass, rows) {
      if (rows <= 0) return;
      const fit = QUANT_MATMUL_TILES.findIndex((t) => rows <= t.rows);
      const i = fit < 0 ? QUANT_MATMUL_TILES.length - 1 : fit;
      const v = variant(i, xUniform !== null && rows <= xUniform.rows);
      const count = Math.ceil(rows / QUANT_MATMUL_TILES[i].rows);
      if (count > MAX_WORKGROUPS) {
        throw new RangeError(`matmul_quant: ${rows} rows exceed one dispatch`);
      }
      params.setRows(rows);
      pass.setPipeline(v.pipeline);
      pass.setBindGroup(0, v.bindGroup);
      pass.dispatchWorkgroups(v.groups, count);
    },
  };
}

/**
 * Row counts that reach each (tile, x binding) pipeline once, where x fits a uniform binding up to
 * `uniformRows` rows (0: never): for each tile, its smallest count (uniform where that fits) and
 * the smallest past the uniform binding's rows, if the tile (the last one: without end) reaches it.
 */
export function quantVariantRows(uniformRows: number): number[] {
  const rows = new Set<number>();
  QUANT_MATMUL_TILES.forEach((tile, i) => {
    const first = tileFirstRow(QUANT_MATMUL_TILES, i);
    const last = i === QUANT_MATMUL_TILES.length - 1 ? Infinity : tile.rows;
    rows.add(first);
    const storage = Math.max(first, uniformRows + 1);
    if (storage <= last) rows.add(storage);
  });
  return [...rows];
}

/** GLU reads two weight rows per output, so it halves the tile's outputs. */
function outsOf(outs: number, mode: MatmulMode): number {
  return mode === "glu" ? Math.max(1, outs / 2) : outs;
}

const STORAGE_X = "@group(0) @binding(1) var<storage, read> xv: array<vec4<f32>>;";

/** The shader with x declared as a uniform array of `vec4s` words instead of a storage array. */
function withUniformX(src: string, vec4s: number): string {
  if (!src.includes(STORAGE_X)) throw new Error("matmul_quant.wgsl: x declaration not found");
  return src.replace(
    STORAGE_X,
    `@group(0) @binding(1) var<uniform> xv: array<vec4<f32>, ${vec4s}>;`,
  );
}

/**
 * Bytes of x a uniform binding declares and binds: the uniform binding limit, at most 64 KiB (the
 * WebGPU default, 16k floats). Fixed per device, not per matrix, so the shader text does not depend
 * on K or on the x buffer's size: a format, tile and mode compile one pipeline whatever the model's
 * widths (and the start-up calibration's x shares it). A buffer that x is read through a uniform
 * binding must hold at least this many bytes from its offset: allocate it with `uniformXBytes`.
 */
export function uniformXBytes(gpu: Gpu): number {
  return Math.floor(Math.min(gpu.device.limits.maxUniformBufferBindingSize, 65536) / 16) * 16;
}

/**
 * A buffer for matrix inputs (x) of at least `bytes`, which the quantized matmuls can read through
 * a uniform binding (dense matmuls read it as storage).
 */
export function createMatmulX(gpu: Gpu, bytes: number, label?: string): GPUBuffer {
  return createStorage(gpu, Math.max(bytes, uniformXBytes(gpu)), label, STORAGE_UNIFORM);
}

/**
 * The uniform binding of x's first uniformXBytes and the whole rows of K it holds, or null where x
 * cannot be bound as a uniform: its buffer lacks UNIFORM usage, its offset is not aligned, or it
 * holds fewer bytes than the binding declares.
 */
function uniformX(
  gpu: Gpu,
  x: BufferArg,
  K: number,
): { binding: GPUBufferBinding; rows: number } | null {
  const buffer = x instanceof GPUBuffer ? x : x.buffer;
  const offset = x instanceof GPUBuffer ? 0 : x.offset ?? 0;
  const size = x instanceof GPUBuffer ? buffer.size : x.size ?? buffer.size - offset;
  if (!(buffer.usage & GPUBufferUsage.UNIFORM)) return null;
  if (offset % gpu.device.limits.minUniformBufferOffsetAlignment !== 0) return null;
  const bytes = uniformXBytes(gpu);
  if (size < bytes) return null;
  const rows = Math.floor(bytes / (K * 4));
  if (rows < 1) return null;
  return { binding: { buffer, offset, size: bytes }, rows };
}
