// Binds shaders/matmul.wgsl: y = x · Wᵀ (store, fused residual add, or fused SwiGLU), batch invariant.
//
// One pipeline per row-tile height; encode picks the smallest tile that covers the batch so decode
// (1..16 rows) reads each weight once per step while a single row pays for no unused rows. A tile's
// pipeline is built the first time a step needs it: the big tiles are large unrolled shaders that
// cost hundreds of ms each to build (more to JIT), and a server may never need some of them.
//
// W may be a storage buffer or a texture holding the same bytes (engine/gpu/weight_texture.ts):
// the same shader with its weight words read by texel fetches, the same arithmetic, the same bits.
// A texture needs the vector path's shapes.
//
// An RMSNorm may be fused into the x loads (`norm`: fused_norm.ts), so the norm before a projection
// costs no dispatch of its own and no normed copy of x.

import type { Gpu } from "../device.ts";
import { type BoundKernel, ParamsUniform } from "../kernel.ts";
import { bindBuffers, getPipeline } from "../shader.ts";
import type { BufferArg } from "../kernel.ts";
import { textureWordsSource } from "../weight_texture.ts";
import { checkNorm, type MatmulNorm, normSource } from "./fused_norm.ts";
import matmul from "../../../shaders/matmul.wgsl" with { type: "text" };
import activations from "../../../shaders/activations.wgsl" with { type: "text" };

const source = matmul + activations;

export type MatmulMode = "store" | "add" | "glu";

/** glu's gate activation: SiLU (SwiGLU) or GELU's tanh approximation (GeGLU). */
export type GluActivation = "silu" | "gelu_tanh";

export interface MatmulArgs {
  /** f32 [rows, K]. */
  x: BufferArg;
  /**
   * W [N, K] (store, add) or [2N, K] (glu: gate rows 0..N-1, then up rows N..2N-1), in a storage
   * buffer or in a weight texture (the same bytes; needs K % 8 == 0, N, ldy and yCol % 4 == 0).
   */
  w: BufferArg | GPUTexture;
  /** f32 [rows, ldy]; this kernel writes columns yCol..yCol+N-1 of each row. */
  y: BufferArg;
  K: number;
  N: number;
  /** Row stride of y in elements (default N). */
  ldy?: number;
  /** First column of y written (default 0), so row-parts of one weight fill one wide y. */
  yCol?: number;
  /** store: y = x·Wᵀ; add: y += x·Wᵀ; glu: y = act(x·Wgateᵀ) * (x·Wupᵀ). */
  mode: MatmulMode;
  /** Normalize x first: y = rmsnorm(x) · Wᵀ (then stored, added or gated as `mode` says). */
  norm?: MatmulNorm;
  /** glu's gate: silu (SwiGLU, the default) or gelu_tanh (GeGLU). */
  activation?: GluActivation;
}

/** A register tile: `rows` tokens × `outs` outputs per lane. */
export interface MatmulTile {
  rows: number;
  outs: number;
}

/** Lanes per workgroup: one 8-wide SIMD group on llvmpipe, a reasonable wave on real GPUs. */
const LANES = 8;
const MAX_WORKGROUPS = 65535;
const MODE_CODES: Record<MatmulMode, number> = { store: 0, add: 1, glu: 2 };

/**
 * Tiles by batch size, measured on llvmpipe (bench/kernels.ts). More outputs per lane amortize the
 * x loads over more weights; more rows amortize the weight loads over more tokens. Bigger tiles
 * stopped paying at about 16x24 (16x48 was no faster than 16x32) while their compile time keeps
 * growing. 24 outputs x 8 lanes = 192 divides the usual Llama widths (576, 960, 1536, 49152), so
 * few lanes compute clamped outputs. GLU reads two weight rows per output and halves `outs`.
 *
 * Building the pipelines of the four tiles takes about 3 s on llvmpipe even with Mesa's shader
 * cache warm, and llvmpipe JIT-compiles a pipeline at its first dispatch (the 16-row tile: 3-6 s
 * per mode on a cold cache). Pipelines are built on first use; the engine's warm-up runs the tiles
 * it wants ready at load (engine.ts).
 */
export const MATMUL_TILES: readonly MatmulTile[] = [
  { rows: 1, outs: 8 },
  { rows: 4, outs: 24 },
  { rows: 8, outs: 24 },
  { rows: 16, outs: 24 },
];

/**
 * Unaligned shapes (odd test sizes, or a row-part whose yCol is not a multiple of 4) take the
 * scalar path: about 11x slower for one row, 3.5x for 16, so weight parts should split at
 * multiples of 4 rows.
 */
const SCALAR_TILES: readonly MatmulTile[] = [{ rows: 4, outs: 4 }];

export function bindMatmul(gpu: Gpu, args: MatmulArgs): BoundKernel {
  const { K, N, mode } = args;
  const ldy = args.ldy ?? N;
  const yCol = args.yCol ?? 0;
  for (const [name, v] of Object.entries({ K, N, ldy, yCol })) {
    if (!Number.isInteger(v) || v < (name === "yCol" ? 0 : 1)) {
      throw new RangeError(`matmul: bad ${name} ${v}`);
    }
  }
  if (yCol + N > ldy) throw new RangeError(`matmul: columns ${yCol}+${N} exceed ldy ${ldy}`);
  if (!(mode in MODE_CODES)) throw new RangeError(`matmul: unknown mode ${mode}`);
  checkNorm("matmul", args.norm);
  const norm = args.norm;

  // The vector path reads weight rows and writes y in 16-byte words, so they must start on one.
  const vector = matmulVectorShape(K, N, ldy, yCol);
  const texture = args.w instanceof GPUTexture;
  if (texture && !vector) {
    throw new RangeError(`matmul: a texture needs the vector path (K=${K} N=${N} yCol=${yCol})`);
  }
  const code = normSource(texture ? textureWordsSource(source, "wv") : source, norm !== undefined);
  const params = new ParamsUniform(gpu, [
    K,
    N,
    ldy,
    yCol,
    { f32: norm?.eps ?? 0 },
    args.activation === "gelu_tanh" ? 1 : 0,
  ]);
  const tiles = vector ? MATMUL_TILES : SCALAR_TILES;
  const groupsOf = (tile: MatmulTile) => Math.ceil(N / (LANES * outsOf(tile, mode)));
  for (const tile of tiles) {
    const groups = groupsOf(tile);
    if (groups > MAX_WORKGROUPS) throw new RangeError(`matmul: N=${N} needs ${groups} workgroups`);
  }
  const built:
    ({ groups: number; pipeline: GPUComputePipeline; bindGroup: GPUBindGroup } | null)[] = tiles
      .map(() => null);
  const variant = (i: number) => {
    const ready = built[i];
    if (ready) return ready;
    const tile = tiles[i];
    const outs = outsOf(tile, mode);
    const pipeline = getPipeline(
      gpu,
      unrollTile(code, tile.rows, outs),
      vector ? "matmulVec" : "matmulScalar",
      {
        LANES,
        TILE_ROWS: tile.rows,
        OUTS: outs,
        W_F16: gpu.f16 ? 1 : 0,
        MODE: MODE_CODES[mode],
        NORM: norm ? 1 : 0,
      },
    );
    const bindGroup = bindBuffers(gpu, pipeline, [
      params.buffer,
      args.x,
      args.w,
      args.y,
      ...(norm ? [norm.gain] : []),
    ]);
    return built[i] = { groups: groupsOf(tile), pipeline, bindGroup };
  };

  return {
    variantRows: tiles.map((_, i) => tileFirstRow(tiles, i)),
    encode(pass, rows) {
      if (rows <= 0) return;
      // The smallest tile that covers the rows; beyond the largest, several of the largest.
      const fit = tiles.findIndex((t) => rows <= t.rows);
      const i = fit < 0 ? tiles.length - 1 : fit;
      const v = variant(i);
      const count = Math.ceil(rows / tiles[i].rows);
      if (count > MAX_WORKGROUPS) throw new RangeError(`matmul: ${rows} rows exceed one dispatch`);
      params.setRows(rows);
      pass.setPipeline(v.pipeline);
      pass.setBindGroup(0, v.bindGroup);
      pass.dispatchWorkgroups(v.groups, count);
    },
  };
}

/** The smallest row count tile i of `tiles` (ascending heights) is chosen for. */
export function tileFirstRow(tiles: readonly MatmulTile[], i: number): number {
  return i === 0 ? 1 : tiles[i - 1].rows + 1;
}

/** Whether a matmul of this shape takes the vector path (the only one a weight texture has). */
export function matmulVectorShape(K: number, N: number, ldy = N, yCol = 0): boolean {
  return K % 8 === 0 && N % 4 === 0 && ldy % 4 === 0 && yCol % 4 === 0;
}

/** Outputs per lane: GLU reads two weight rows per output, so it halves the tile's. */
function outsOf(tile: MatmulTile, mode: MatmulMode): number {
  return mode === "glu" ? Math.max(1, tile.outs / 2) : tile.outs;
}

/**
 * Expands the shader's unrolled lines: a line holding `$t` is repeated for each tile row, `$r` for
 * each output of the lane, `$q` for each quad of outputs (outs / 4), and a line holding several
 * for every combination (outputs outer, rows inner).
 */
export function unrollTile(src: string, tileRows: number, outs: number): string {
  const counts: [string, number][] = [["$r", outs], ["$q", Math.floor(outs / 4)], ["$t", tileRows]];
  const out: string[] = [];
  for (const line of src.split("\n")) {
    const present = line.trimStart().startsWith("//")
      ? []
      : counts.filter(([tag]) => line.includes(tag));
    let lines = [line];
    for (const [tag, count] of present) {
      lines = lines.flatMap((l) =>
        Array.from({ length: count }, (_, i) => l.replaceAll(tag, String(i)))
      );
    }
    out.push(...lines);
  }
  return out.join("\n");
}
