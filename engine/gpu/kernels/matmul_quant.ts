// Binds shaders/matmul_quant.wgsl: y = x · Wᵀ with W block-quantized (store, add or SwiGLU), the
// quantized twin of matmul.ts, taking the same arguments plus the format.
//
// W is one part in quant_layout.ts's layout: N rows (2N for glu: gate rows, then up rows) of K
// values. As in matmul.ts, one pipeline per row-tile height, built on first use, and encode picks
// the smallest tile that covers the batch.

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import { type MatmulArgs, type MatmulMode, type MatmulTile, unrollTile } from "./matmul.ts";
import { Q_VEC4_PER_BLOCK, quantLayout } from "./quant_layout.ts";
import { QUANT_FORMATS, type QuantType } from "../../model/quant/formats.ts";
import blocks from "../../../shaders/quant_blocks.wgsl" with { type: "text" };
import matmulQuant from "../../../shaders/matmul_quant.wgsl" with { type: "text" };

const source = blocks + matmulQuant;

export interface QuantMatmulArgs extends MatmulArgs {
  type: QuantType;
}

const LANES = 8;
const MAX_WORKGROUPS = 65535;
const MODE_CODES: Record<MatmulMode, number> = { store: 0, add: 1, glu: 2 };
const FORMAT_CODES: Record<QuantType, number> = { q8_0: 0, q4_0: 1, q4_k: 2, q6_k: 3 };

/** Register tiles by batch size (see matmul.ts), measured on llvmpipe with bench/kernels.ts. */
export const QUANT_MATMUL_TILES: readonly MatmulTile[] = [
  { rows: 1, outs: 8 },
  { rows: 4, outs: 8 },
  { rows: 16, outs: 4 },
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
  const format = QUANT_FORMATS[type];
  const layout = quantLayout(type, mode === "glu" ? 2 * N : N, K); // throws on a partial block
  const params = new ParamsUniform(gpu, [K, N, ldy, yCol, layout.sOffset / 16, layout.dOffset / 4]);
  const groupsOf = (tile: MatmulTile) => Math.ceil(N / (LANES * outsOf(tile, mode)));
  for (const tile of QUANT_MATMUL_TILES) {
    const groups = groupsOf(tile);
    if (groups > MAX_WORKGROUPS) {
      throw new RangeError(`matmul_quant: N=${N} needs ${groups} workgroups`);
    }
  }
  const built:
    ({ groups: number; pipeline: GPUComputePipeline; bindGroup: GPUBindGroup } | null)[] =
      QUANT_MATMUL_TILES.map(() => null);
  const variant = (i: number) => {
    const ready = built[i];
    if (ready) return ready;
    const tile = QUANT_MATMUL_TILES[i];
    const outs = outsOf(tile, mode);
    const pipeline = getPipeline(gpu, unrollTile(source, tile.rows, outs), "matmulQuant", {
      LANES,
      TILE_ROWS: tile.rows,
      OUTS: outs,
      MODE: MODE_CODES[mode],
      FMT: FORMAT_CODES[type],
      BLOCK: format.blockElems,
      CHUNKS: format.blockElems / 32,
      Q_VEC4: Q_VEC4_PER_BLOCK[type],
    });
    const bindGroup = bindBuffers(gpu, pipeline, [params.buffer, args.x, args.w, args.w, args.y]);
    return built[i] = { groups: groupsOf(tile), pipeline, bindGroup };
  };

  return {
    encode(pass, rows) {
      if (rows <= 0) return;
      const fit = QUANT_MATMUL_TILES.findIndex((t) => rows <= t.rows);
      const i = fit < 0 ? QUANT_MATMUL_TILES.length - 1 : fit;
      const v = variant(i);
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

/** GLU reads two weight rows per output, so it halves the tile's outputs. */
function outsOf(tile: MatmulTile, mode: MatmulMode): number {
  return mode === "glu" ? Math.max(1, tile.outs / 2) : tile.outs;
}
