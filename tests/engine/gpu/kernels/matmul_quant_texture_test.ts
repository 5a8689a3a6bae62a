// The quantized matmul with its blocks in a weight texture (engine/gpu/weight_texture.ts) against
// float64 of the dequantized weights, and against the same kernel reading the same bytes from a
// storage buffer, for every format (rerun a failure with SLUICE_TEST_SEED=<seed>).
//
// Bound, per output, as in quant_kernels_test.ts: |got - want| <= 2^-16 · Σ_k |x_k| (|w_k| + 2 M_k)
// with M_k the largest |w| of k's 16-value half-chunk (the kernel sums a·Σx·q + b·Σx per half, so
// f32 rounding scales with those magnitudes); glu adds silu's slope (≤ 1.1) times each factor's
// bound. Beyond the bound, the texture kernel must give the storage kernel's bits exactly.

import type { Gpu } from "../../../../engine/gpu/device.ts";
import { readF32, uploadStorage, writeBytes } from "../../../../engine/gpu/buffers.ts";
import type { MatmulMode } from "../../../../engine/gpu/kernels/matmul.ts";
import { bindQuantMatmul, createMatmulX } from "../../../../engine/gpu/kernels/matmul_quant.ts";
import { packQuantPart } from "../../../../engine/gpu/kernels/quant_layout.ts";
import { createWeightTexture, writeTextureBytes } from "../../../../engine/gpu/weight_texture.ts";
import {
  dequantize,
  QUANT_FORMATS,
  QUANT_TYPES,
  quantize,
  type QuantType,
} from "../../../../engine/quant/formats.ts";
import { poisonedF32, testGpu } from "../../../helpers/gpu.ts";
import { randomArray, rng, testSeed } from "../../../helpers/random.ts";
import { assertEquals } from "../../../helpers/testing.ts";
import { TALL_TEXTURE_TYPES } from "../../../helpers/quant_plan.ts";

const QUANT_BOUND = 2 ** -16;
const SPARE = 2;

/**
 * [K, N, rows] in whole blocks, x in a uniform binding (as the engine's); sampled as
 * tests/helpers/quant_plan.ts says, so that each texture pipeline's storage twin is one that
 * quant_kernels_test.ts and the model tests compile too. Store (and add, on the same pipeline) and
 * glu at the 1-row tile; the 16-row tile (19 rows: a full tile and a partial one; 16 s to compile
 * from a texture on a cold cache) for TALL_TEXTURE_TYPES. The 4-row tile reads a texture in
 * matmul_quant_norm_test.ts. 3 blocks per row leave a D word half used; the last store shape spans
 * several texture rows (over 4096 words in its Q region alone), so blocks and the S and D regions
 * straddle texture rows.
 */
function shapes(type: QuantType, mode: MatmulMode): [number, number, number][] {
  const B = QUANT_FORMATS[type].blockElems;
  const one: [number, number, number] = [3 * B, 7, 1];
  const tall: [number, number, number][] = TALL_TEXTURE_TYPES.includes(type)
    ? [[2 * B, 24, 19]]
    : [];
  if (mode === "glu") return [one, ...tall];
  if (mode === "add") return [one, ...tall];
  return [one, ...tall, [B, B === 32 ? 4403 : 601, 1]];
}

function run(gpu: Gpu, kernel: ReturnType<typeof bindQuantMatmul>, rows: number): void {
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  kernel.encode(pass, rows);
  pass.end();
  gpu.device.queue.submit([encoder.finish()]);
}

/** float64 outputs and per-output tolerances (see the header). */
function reference(
  x: Float32Array,
  w: Float32Array,
  rows: number,
  K: number,
  N: number,
  mode: MatmulMode,
  y0: Float32Array,
) {
  const halfMax = new Float32Array(w.length);
  for (let i = 0; i < w.length; i += 16) {
    let m = 0;
    for (let j = 0; j < 16; j++) m = Math.max(m, Math.abs(w[i + j]));
    halfMax.fill(m, i, i + 16);
  }
  const dot = (m: number, n: number) => {
    let sum = 0, scale = 0;
    for (let k = 0; k < K; k++) {
      const i = n * K + k;
      sum += x[m * K + k] * w[i];
      scale += Math.abs(x[m * K + k]) * (Math.abs(w[i]) + 2 * halfMax[i]);
    }
    return { sum, tol: QUANT_BOUND * scale };
  };
  const want = new Float64Array(rows * N), tol = new Float64Array(rows * N);
  for (let m = 0; m < rows; m++) {
    for (let n = 0; n < N; n++) {
      const i = m * N + n, g = dot(m, n);
      if (mode === "glu") {
        const u = dot(m, N + n), s = g.sum / (1 + Math.exp(-g.sum));
        want[i] = s * u.sum;
        tol[i] = 1.1 * g.tol * (Math.abs(u.sum) + u.tol) + (Math.abs(s) + 1.1 * g.tol) * u.tol +
          1e-6 * Math.abs(want[i]);
      } else {
        want[i] = g.sum + (mode === "add" ? y0[i] : 0);
        tol[i] = g.tol + 2 ** -23 * Math.abs(want[i]);
      }
    }
  }
  return { want, tol };
}

for (const type of QUANT_TYPES) {
  Deno.test(`matmul_quant ${type} from a texture: float64 and the storage kernel's bits`, async (t) => {
    const gpu = await testGpu();
    for (const mode of ["store", "add", "glu"] as const) {
      for (const [K, N, rows] of shapes(type, mode)) {
        await t.step(`${mode} K=${K} N=${N} rows=${rows}`, async () => {
          const seed = testSeed();
          const next = rng(seed);
          const weightRows = (mode === "glu" ? 2 : 1) * N;
          const ggml = quantize(type, Float32Array.from(randomArray(next, weightRows * K, 0.5)));
          const w = dequantize(type, ggml, weightRows * K);
          const packed = packQuantPart(type, ggml, weightRows, K);
          const texture = createWeightTexture(gpu, packed.byteLength);
          writeTextureBytes(gpu, texture, 0, packed);
          const storage = uploadStorage(gpu, packed);
          const x = Float32Array.from(randomArray(next, rows * K));
          const xb = createMatmulX(gpu, x.byteLength, "x");
          writeBytes(gpu, xb, 0, x);
          const y0 = Float32Array.from(randomArray(next, (rows + SPARE) * N, 4));
          const outputs: Float32Array[] = [];
          for (const weights of [texture, storage]) {
            const y = mode === "add"
              ? uploadStorage(gpu, y0)
              : poisonedF32(gpu, (rows + SPARE) * N);
            run(gpu, bindQuantMatmul(gpu, { x: xb, w: weights, y, K, N, mode, type }), rows);
            outputs.push(await readF32(gpu, y, (rows + SPARE) * N));
            y.destroy();
          }
          const [got, fromStorage] = outputs;
          const what = `${type} ${mode} K=${K} N=${N} rows=${rows} seed=${seed}`;
          const { want, tol } = reference(x, w, rows, K, N, mode, y0);
          for (let i = 0; i < want.length; i++) {
            const err = Math.abs(got[i] - want[i]);
            // NaN fails: !(NaN <= tol).
            if (!(err <= tol[i])) {
              throw new Error(`${what}: [${i}] got ${got[i]}, want ${want[i]} (tol ${tol[i]})`);
            }
          }
          assertEquals(
            new Uint32Array(got.buffer),
            new Uint32Array(fromStorage.buffer),
            `${what}: texture and storage kernels differ (or a spare row was written)`,
          );
          texture.destroy();
          storage.destroy();
          xb.destroy();
        });
      }
    }
  });
}
