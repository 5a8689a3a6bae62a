// The integer-dot matmul (engine/gpu/kernels/matmul_int.ts) behind quantize_x, for every GGUF
// format and mode, against float64 of the dequantized weights (rerun a failure with
// SLUICE_TEST_SEED=<seed>):
//
// 1. With the rounded activations x̃ = d · q that quantize_x wrote (read back): the kernel's sums of
//    int8 products are exact, so only the f32 scaling and the chain over chunks round. Per output,
//    |got - want| <= (C + 8) · 2^-24 · Σ_k |x̃_k| (|w_k| + 2 M_k), C = K / 32 chunks and M_k the
//    largest |w| of k's 16-value half-chunk (a chunk's term is at most that, its offset term
//    included; each chunk adds a few roundings and the chain C more). add adds 2^-23 |want|, glu
//    combines its factors' bounds with silu's slope (tests/helpers/fused_norm_reference.ts).
// 2. With the unrounded activations v (x, or rmsnorm(x) · gain where the norm is fused): the stated
//    bound is (1)'s plus Σ_blocks d_b (1/2 + 2^-12) Σ_{k in b} |w_k|, since quantize_x puts every
//    value within d (1/2 + 2^-12) of v (tests/engine/quant/quantize_x_test.ts).
// Beyond the bounds: weights in a texture give the bits they give in storage, a row alone the bits
// it has in a 19-row batch (the 16-row tile), and rows past the step's keep their poison (or y0).
//
// Pipelines are one per (format, row tile, glu or not, weight layout) and take about a second each
// to compile on llvmpipe, so the product is sampled: every format runs store and add (one
// pipeline) at the 1-row tile and glu at the 4-row one, or the other way round (alternating by
// format), so every tile meets every mode; the 16-row tile runs for q8_0 (its unrolled rows are the
// same code for every format), and textures for q4_0 and q4_k (a 32- and a 256-value block's
// offsets) at the smaller tiles.

import type { Gpu } from "../../../engine/gpu/device.ts";
import { readBack, readF32, uploadStorage } from "../../../engine/gpu/buffers.ts";
import type { BoundKernel } from "../../../engine/gpu/kernel.ts";
import type { MatmulMode } from "../../../engine/gpu/kernels/matmul.ts";
import { bindIntMatmul, hasIntDot } from "../../../engine/gpu/kernels/matmul_int.ts";
import {
  bindQuantizeX,
  createQuantizedX,
  destroyQuantizedX,
  type QuantizedX,
} from "../../../engine/gpu/kernels/quantize_x.ts";
import { packQuantPart } from "../../../engine/gpu/kernels/quant_layout.ts";
import { createWeightTexture, writeTextureBytes } from "../../../engine/gpu/weight_texture.ts";
import {
  dequantize,
  QUANT_FORMATS,
  QUANT_TYPES,
  quantize,
  type QuantType,
} from "../../../engine/quant/formats.ts";
import { f16BitsToF32, toF16Array } from "../../../engine/quant/half.ts";
import { modeOutputs, normedRows } from "../../helpers/fused_norm_reference.ts";
import { poisonedF32, testGpu } from "../../helpers/gpu.ts";
import { everyOther } from "../../helpers/quant_plan.ts";
import { randomArray, rng, testSeed } from "../../helpers/random.ts";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";

const SPARE = 2;
const TALL: readonly QuantType[] = ["q8_0"];
const TEXTURE: readonly QuantType[] = ["q4_0", "q4_k"];

interface Case {
  mode: MatmulMode;
  K: number;
  N: number;
  rows: number;
  /** The fused norm's eps, or none. */
  eps?: number;
}

function cases(type: QuantType): Case[] {
  const B = QUANT_FORMATS[type].blockElems;
  const one = { K: 2 * B, N: 13, rows: 1 }, four = { K: 3 * B, N: 37, rows: 3 };
  const [first, second] = everyOther(type) ? [one, four] : [four, one];
  return [
    { mode: "store", ...first, eps: 1e-5 },
    { mode: "add", ...first, N: 24 },
    { mode: "glu", ...second, eps: 0.25 },
    ...(TALL.includes(type) ? [{ mode: "store" as const, K: B, N: 24, rows: 19 }] : []),
  ];
}

function run(gpu: Gpu, ...steps: [BoundKernel, number][]): void {
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  for (const [kernel, rows] of steps) kernel.encode(pass, rows);
  pass.end();
  gpu.device.queue.submit([encoder.finish()]);
}

/** The gain as the path stores it (f16 where W is) and the exact values it holds. */
function gainOf(gpu: Gpu, values: ArrayLike<number>): { buffer: GPUBuffer; exact: Float64Array } {
  if (gpu.f16) {
    const bits = toF16Array(values);
    return { buffer: uploadStorage(gpu, bits), exact: Float64Array.from(bits, f16BitsToF32) };
  }
  const f32 = Float32Array.from(values);
  return { buffer: uploadStorage(gpu, f32), exact: Float64Array.from(f32) };
}

/** The activations quantize_x wrote, as float64 values d · q, and each value's block scale. */
async function roundedX(gpu: Gpu, xq: QuantizedX, values: number) {
  const q = new Int8Array(await readBack(gpu, xq.q, values));
  const s = new Float32Array(await readBack(gpu, xq.s, (values / 32) * 8));
  const rounded = new Float64Array(values), d = new Float64Array(values);
  for (let i = 0; i < values; i++) {
    d[i] = s[2 * (i >> 5)];
    rounded[i] = d[i] * q[i];
  }
  return { rounded, d };
}

/** Per value: the largest |w| of its 16-value half-chunk. */
function halfMaxima(w: Float32Array): Float32Array {
  const out = new Float32Array(w.length);
  for (let i = 0; i < w.length; i += 16) {
    let m = 0;
    for (let j = 0; j < 16; j++) m = Math.max(m, Math.abs(w[i + j]));
    out.fill(m, i, i + 16);
  }
  return out;
}

function assertWithin(got: Float32Array, want: Float64Array, tol: Float64Array, what: string) {
  for (let i = 0; i < want.length; i++) {
    // NaN fails: !(NaN <= tol).
    if (!(Math.abs(got[i] - want[i]) <= tol[i])) {
      throw new Error(`${what}: [${i}] got ${got[i]}, want ${want[i]} (tol ${tol[i]})`);
    }
  }
}

for (const type of QUANT_TYPES) {
  Deno.test(`matmul_int ${type}: float64 with the rounded and the unrounded x`, async (t) => {
    if (!hasIntDot()) return; // an adapter without the integer dot takes the float path only
    const gpu = await testGpu();
    for (const c of cases(type)) {
      const { mode, K, N, rows, eps } = c;
      await t.step(`${mode} K=${K} N=${N} rows=${rows}${eps ? ` norm` : ""}`, async () => {
        const seed = testSeed();
        const next = rng(seed);
        const what = `${type} ${mode} K=${K} N=${N} rows=${rows} seed=${seed}`;
        const weightRows = (mode === "glu" ? 2 : 1) * N;
        const ggml = quantize(type, Float32Array.from(randomArray(next, weightRows * K, 0.5)));
        const w = dequantize(type, ggml, weightRows * K);
        const halfMax = halfMaxima(w);
        const packed = packQuantPart(type, ggml, weightRows, K);
        const storage = uploadStorage(gpu, packed);
        const x = Float32Array.from(randomArray(next, rows * K, 3));
        const xb = uploadStorage(gpu, x);
        const gain = eps === undefined ? null : gainOf(gpu, randomArray(next, K, 1.5));
        const norm = gain ? { gain: gain.buffer, eps: eps! } : undefined;
        const xq = createQuantizedX(gpu, rows * K);
        const y0 = Float32Array.from(randomArray(next, (rows + SPARE) * N, 4));
        const fresh = () =>
          mode === "add" ? uploadStorage(gpu, y0) : poisonedF32(gpu, (rows + SPARE) * N);

        const y = fresh();
        const bindWith = (weights: GPUBuffer | GPUTexture, out: GPUBuffer) =>
          bindIntMatmul(gpu, { x: xq, w: weights, y: out, K, N, mode, type });
        run(gpu, [bindQuantizeX(gpu, { x: xb, out: xq, K, norm }), rows], [
          bindWith(storage, y),
          rows,
        ]);
        const got = await readF32(gpu, y, (rows + SPARE) * N);
        for (let i = rows * N; i < got.length; i++) {
          const kept = mode === "add" ? got[i] === y0[i] : Number.isNaN(got[i]);
          assert(kept, `${what}: spare [${i}] written`);
        }

        // (1) The rounded activations: exact products, f32 scaling.
        const { rounded, d } = await roundedX(gpu, xq, rows * K);
        const C = K / 32;
        const exact = modeOutputs(rows, N, mode, y0, (m, n) => {
          let sum = 0, scale = 0;
          for (let k = 0; k < K; k++) {
            const v = rounded[m * K + k], i = n * K + k;
            sum += v * w[i];
            scale += Math.abs(v) * (Math.abs(w[i]) + 2 * halfMax[i]);
          }
          return { sum, tol: (C + 8) * 2 ** -24 * scale };
        });
        assertWithin(got, exact.want, exact.tol, `${what}, rounded x`);

        // (2) The unrounded activations, within the rounding's stated bound.
        const v = norm ? normedRows(x, gain!.exact, rows, K, eps!) : null;
        const value = (m: number, k: number) => v ? v.gained[m * K + k] * v.scale[m] : x[m * K + k];
        const unrounded = modeOutputs(rows, N, mode, y0, (m, n) => {
          let sum = 0, scale = 0, rounding = 0;
          for (let k = 0; k < K; k++) {
            const i = n * K + k, xr = rounded[m * K + k];
            sum += value(m, k) * w[i];
            scale += Math.abs(xr) * (Math.abs(w[i]) + 2 * halfMax[i]);
            rounding += d[m * K + k] * (0.5 + 2 ** -12) * Math.abs(w[i]);
          }
          return { sum, tol: (C + 8) * 2 ** -24 * scale + rounding };
        });
        assertWithin(got, unrounded.want, unrounded.tol, `${what}, unrounded x`);

        // The same bits from a texture of the same words, and for a row alone.
        if (TEXTURE.includes(type) && rows <= 16) {
          const texture = createWeightTexture(gpu, packed.byteLength);
          writeTextureBytes(gpu, texture, 0, packed);
          const yt = fresh();
          run(gpu, [bindWith(texture, yt), rows]);
          const fromTexture = await readF32(gpu, yt, (rows + SPARE) * N);
          assertEquals(
            new Uint32Array(fromTexture.buffer),
            new Uint32Array(got.buffer),
            `${what}: texture and storage differ`,
          );
          texture.destroy();
          yt.destroy();
        }
        if (rows > 16) {
          const alone = fresh();
          run(gpu, [bindWith(storage, alone), 1]);
          assertEquals(
            new Uint32Array((await readF32(gpu, alone, N)).buffer),
            new Uint32Array(got.buffer, 0, N),
            `${what}: row 0 alone differs from row 0 in the batch`,
          );
          alone.destroy();
        }
        destroyQuantizedX(xq);
        for (const b of [storage, xb, y, gain?.buffer]) b?.destroy();
      });
    }
  });
}

Deno.test("matmul_int refuses bad shapes and rows past its quantized x", async () => {
  if (!hasIntDot()) return;
  const gpu = await testGpu();
  const xq = createQuantizedX(gpu, 64);
  const w = uploadStorage(gpu, packQuantPart("q4_0", new Uint8Array(18 * 2), 1, 64));
  const y = poisonedF32(gpu, 4);
  const args = { x: xq, w, y, K: 64, N: 1, mode: "store" as const, type: "q4_0" as const };
  assertThrows(() => bindIntMatmul(gpu, { ...args, K: 48 }), /whole blocks/);
  assertThrows(() => bindIntMatmul(gpu, { ...args, type: "q4_k" }), /whole blocks/);
  assertThrows(() => bindIntMatmul(gpu, { ...args, N: 0 }), /bad N/);
  assertThrows(() => bindIntMatmul(gpu, { ...args, yCol: 1, ldy: 1 }), /exceed ldy/);
  const kernel = bindIntMatmul(gpu, args);
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  assertThrows(() => kernel.encode(pass, 2), /exceed its quantized x/);
  pass.end();
  encoder.finish();
  destroyQuantizedX(xq);
  w.destroy();
  y.destroy();
});
