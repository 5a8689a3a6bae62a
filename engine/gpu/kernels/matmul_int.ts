// Binds shaders/matmul_int.wgsl: y = x · Wᵀ with W block-quantized and x quantized to int8 blocks
// (quantize_x.ts), multiplied by dot4I8Packed: the integer-dot twin of matmul_quant.ts, for
// adapters with WGSL's packed_4x8_integer_dot_product. The same modes (store, add, SwiGLU), the
// same weight layouts (quant_layout.ts, in a storage buffer or a weight texture of the same words:
// the same bits), and as there one pipeline per row tile, built on first use, the smallest tile
// that covers the batch chosen per step. The norm before a projection is quantize_x's, not this
// kernel's.

import type { Gpu } from "../device.ts";
import { type BoundKernel, type BufferArg, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import { type MatmulMode, type MatmulTile, tileFirstRow, unrollTile } from "./matmul.ts";
import { FORMAT_CODES, quantLayout, qVec4PerBlock } from "./quant_layout.ts";
import { textureWordsSource } from "../weight_texture.ts";
import { type QuantizedX, X_BLOCK } from "./quantize_x.ts";
import { QUANT_FORMATS, type QuantType } from "../../quant/formats.ts";
import blocks from "../../../shaders/quant_blocks.wgsl" with { type: "text" };
import matmulInt from "../../../shaders/matmul_int.wgsl" with { type: "text" };
import activations from "../../../shaders/activations.wgsl" with { type: "text" };

const source = blocks + matmulInt + activations;

/** The WGSL language feature the kernel needs (dot4I8Packed, pack4xI8). */
export const INT_DOT_FEATURE = "packed_4x8_integer_dot_product";

/** Whether this runtime's WGSL has the integer dot product (navigator.gpu.wgslLanguageFeatures). */
export function hasIntDot(): boolean {
  // Deno has WGSL language features; its types do not yet.
  const features = (navigator.gpu as { wgslLanguageFeatures?: { has(name: string): boolean } })
    ?.wgslLanguageFeatures;
  return features?.has(INT_DOT_FEATURE) ?? false;
}

export interface IntMatmulArgs {
  /** x [rows, K] as quantize_x wrote it. */
  x: QuantizedX;
  /** W [N, K] (glu: [2N, K]) in quant_layout.ts's layout, in a storage buffer or a texture. */
  w: BufferArg | GPUTexture;
  /** f32 [rows, ldy]; columns yCol..yCol+N-1 are written. */
  y: BufferArg;
  K: number;
  N: number;
  ldy?: number;
  yCol?: number;
  mode: MatmulMode;
  type: QuantType;
}

const LANES = 8;
const MAX_WORKGROUPS = 65535;
/** Store and add share a pipeline (the shader reads which from its params); glu is its own. */
const MODE_CODES: Record<MatmulMode, number> = { store: 0, add: 0, glu: 2 };

/**
 * Register tiles by batch size. A weight chunk is unpacked to int8 once per output and used by
 * every row of the tile, so taller tiles are where the integer path gains on the float one.
 */
export const INT_MATMUL_TILES: readonly MatmulTile[] = [
  { rows: 1, outs: 8 },
  { rows: 4, outs: 8 },
  { rows: 16, outs: 4 },
];

export function bindIntMatmul(gpu: Gpu, args: IntMatmulArgs): BoundKernel {
  const { K, N, mode, type } = args;
  const ldy = args.ldy ?? N;
  const yCol = args.yCol ?? 0;
  for (const [name, v] of Object.entries({ K, N, ldy, yCol })) {
    if (!Number.isInteger(v) || v < (name === "yCol" ? 0 : 1)) {
      throw new RangeError(`matmul_int: bad ${name} ${v}`);
    }
  }
  if (!(type in FORMAT_CODES)) throw new RangeError(`matmul_int: unknown type ${type}`);
  if (yCol + N > ldy) throw new RangeError(`matmul_int: columns ${yCol}+${N} exceed ldy ${ldy}`);
  if (!(mode in MODE_CODES)) throw new RangeError(`matmul_int: unknown mode ${mode}`);
  if (K % X_BLOCK !== 0) throw new RangeError(`matmul_int: K=${K} is not whole blocks of x`);
  if (!hasIntDot()) throw new Error(`matmul_int: this runtime's WGSL lacks ${INT_DOT_FEATURE}`);
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
  ]);
  const outsOf = (tile: MatmulTile) => mode === "glu" ? Math.max(1, tile.outs / 2) : tile.outs;
  const groupsOf = (tile: MatmulTile) => Math.ceil(N / (LANES * outsOf(tile)));
  for (const tile of INT_MATMUL_TILES) {
    if (groupsOf(tile) > MAX_WORKGROUPS) {
      throw new RangeError(`matmul_int: N=${N} needs ${groupsOf(tile)} workgroups`);
    }
  }
  const code = args.w instanceof GPUTexture
    ? textureWordsSource(textureWordsSource(source, "wq"), "wd")
    : source;
  type Built = { groups: number; pipeline: GPUComputePipeline; bindGroup: GPUBindGroup };
  const built: (Built | null)[] = INT_MATMUL_TILES.map(() => null);
  const variant = (i: number): Built => {
    const ready = built[i];
    if (ready) return ready;
    const tile = INT_MATMUL_TILES[i];
    const outs = outsOf(tile);
    const pipeline = getPipeline(gpu, unrollTile(code, tile.rows, outs), "matmulInt", {
      LANES,
      TILE_ROWS: tile.rows,
      OUTS: outs,
      MODE: MODE_CODES[mode],
      FMT: FORMAT_CODES[type],
      BLOCK: format.blockElems,
      CHUNKS: format.blockElems / 32,
      Q_VEC4: qVec4PerBlock(type),
    });
    const bindGroup = bindBuffers(gpu, pipeline, [
      params.buffer,
      args.x.q,
      args.x.s,
      args.w,
      args.w,
      args.y,
    ]);
    return built[i] = { groups: groupsOf(tile), pipeline, bindGroup };
  };

  return {
    variantRows: INT_MATMUL_TILES.map((_, i) => tileFirstRow(INT_MATMUL_TILES, i)),
    encode(pass, rows) {
      if (rows <= 0) return;
      if (rows * K > args.x.capacity) {
        throw new RangeError(`matmul_int: ${rows} rows of ${K} exceed its quantized x`);
      }
      const fit = INT_MATMUL_TILES.findIndex((t) => rows <= t.rows);
      const i = fit < 0 ? INT_MATMUL_TILES.length - 1 : fit;
      const v = variant(i);
      const count = Math.ceil(rows / INT_MATMUL_TILES[i].rows);
      if (count > MAX_WORKGROUPS) {
        throw new RangeError(`matmul_int: ${rows} rows exceed one dispatch`);
      }
      params.setRows(rows);
      pass.setPipeline(v.pipeline);
      pass.setBindGroup(0, v.bindGroup);
      pass.dispatchWorkgroups(v.groups, count);
    },
  };
}
