// The float matmul with an RMSNorm fused into its x loads (engine/gpu/kernels/fused_norm.ts) against
// a float64 rmsnorm-then-matmul, on both dtype paths, every mode and row tile, the vector and scalar
// paths, weights in a storage buffer and in a texture (rerun a failure with SLUICE_TEST_SEED=<seed>).
//
// Bound, per output of row m (the f16 path's reference uses the f16-rounded weights and gain, so
// both paths differ from float64 only by f32 arithmetic): with T = s_m · Σ_k |x_k g_k w_k| and s_m
// the row's norm scale, |got - want| <= (K + 4) · 2^-24 · T (a K-term f32 dot product of rounded
// products, worst case) + scaleBound(K) · T (the f32 scale); add adds 2^-23 |want|; glu combines
// its two factors' bounds with silu's slope (<= 1.1) and 2^-20 |want| for exp and the division.
// eps is 1e-5 or 0.25 by shape, so an eps in the wrong place fails. Beyond the bound, a texture must
// give the storage buffer's bits, and a row alone the bits it has in a 19-row batch.

import type { Gpu } from "../../../../engine/gpu/device.ts";
import { readF32, uploadStorage } from "../../../../engine/gpu/buffers.ts";
import { bindMatmul, type MatmulMode } from "../../../../engine/gpu/kernels/matmul.ts";
import type { BoundKernel } from "../../../../engine/gpu/kernel.ts";
import { createWeightTexture, writeTextureBytes } from "../../../../engine/gpu/weight_texture.ts";
import { f16BitsToF32, toF16Array } from "../../../../engine/quant/half.ts";
import { modeOutputs, normedRows, scaleBound } from "../../../helpers/fused_norm_reference.ts";
import { poisonedF32, testGpus } from "../../../helpers/gpu.ts";
import { randomArray, rng, testSeed } from "../../../helpers/random.ts";
import { assertEquals, assertThrows } from "../../../helpers/testing.ts";

const SPARE = 2;

/**
 * [K, N, rows, eps]: rows 1, 3, 7 and 19 reach the 1-, 4-, 8- and 16-row tiles (19: a full tile and
 * a partial one); N=196 leaves lanes whose quads are clamped; K=37 (odd) and N=9 (odd, K % 8 == 0)
 * take the scalar path.
 */
const SHAPES: [number, number, number, number][] = [
  [64, 40, 1, 1e-5],
  [576, 196, 3, 0.25],
  [96, 24, 7, 1e-5],
  [48, 36, 19, 0.25],
  [37, 13, 3, 0.25],
  [40, 9, 1, 1e-5],
];

/** Bytes of W (f16 or f32 as the path stores it) and the exact values they hold. */
function asW(gpu: Gpu, values: ArrayLike<number>): { bytes: Uint8Array; exact: Float64Array } {
  if (gpu.f16) {
    const bits = toF16Array(values);
    return { bytes: new Uint8Array(bits.buffer), exact: Float64Array.from(bits, f16BitsToF32) };
  }
  const f32 = Float32Array.from(values);
  return { bytes: new Uint8Array(f32.buffer), exact: Float64Array.from(f32) };
}

function run(gpu: Gpu, kernel: BoundKernel, rows: number): void {
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  kernel.encode(pass, rows);
  pass.end();
  gpu.device.queue.submit([encoder.finish()]);
}

/** float64 rmsnorm-then-matmul outputs and per-output tolerances (see the header). */
function reference(
  x: Float32Array,
  gain: Float64Array,
  w: Float64Array,
  shape: { rows: number; K: number; N: number; eps: number; mode: MatmulMode },
  y0: Float32Array,
): { want: Float64Array; tol: Float64Array } {
  const { rows, K, N, eps, mode } = shape;
  const { gained, scale } = normedRows(x, gain, rows, K, eps);
  const dot = (m: number, n: number) => {
    let sum = 0, abs = 0;
    for (let k = 0; k < K; k++) {
      const t = gained[m * K + k] * w[n * K + k];
      sum += t;
      abs += Math.abs(t);
    }
    const s = scale[m];
    return { sum: s * sum, tol: ((K + 4) * 2 ** -24 + scaleBound(K)) * s * abs };
  };
  return modeOutputs(rows, N, mode, y0, dot);
}

/** Throws at the first output outside its tolerance (NaN included) or a spare row written. */
function checkOutputs(
  got: Float32Array,
  want: Float64Array,
  tol: Float64Array,
  spare: Float32Array,
  what: string,
): void {
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i] - want[i]);
    // NaN fails: !(NaN <= tol).
    if (!(err <= tol[i])) {
      throw new Error(`${what}: [${i}] got ${got[i]}, want ${want[i]} (tol ${tol[i]})`);
    }
  }
  for (let i = want.length; i < got.length; i++) {
    if (!Object.is(got[i], spare[i]) && !(Number.isNaN(got[i]) && Number.isNaN(spare[i]))) {
      throw new Error(`${what}: spare [${i}] written (${got[i]})`);
    }
  }
}

for (const mode of ["store", "add", "glu"] as const) {
  Deno.test(`matmul ${mode} with a fused rmsnorm: float64, texture bits, batch invariance`, async (t) => {
    for (const { label, gpu } of await testGpus()) {
      for (const [K, N, rows, eps] of SHAPES) {
        await t.step(`${label} K=${K} N=${N} rows=${rows} eps=${eps}`, async () => {
          const seed = testSeed();
          const next = rng(seed);
          const what = `${label} ${mode} K=${K} N=${N} rows=${rows} seed=${seed}`;
          const weightRows = (mode === "glu" ? 2 : 1) * N;
          const w = asW(gpu, randomArray(next, weightRows * K, 0.5));
          // Gains around 1 with some sign flips and near-zeros, as trained norms have.
          const g = asW(gpu, randomArray(next, K, 1.5));
          const x = Float32Array.from(randomArray(next, rows * K, 3));
          const y0 = Float32Array.from(randomArray(next, (rows + SPARE) * N, 4));
          const xb = uploadStorage(gpu, x), gb = uploadStorage(gpu, g.bytes);
          const norm = { gain: gb, eps };
          const vector = K % 8 === 0 && N % 4 === 0;
          const layouts: (GPUBuffer | GPUTexture)[] = [uploadStorage(gpu, w.bytes)];
          if (vector) {
            const texture = createWeightTexture(gpu, w.bytes.byteLength);
            writeTextureBytes(gpu, texture, 0, w.bytes);
            layouts.push(texture);
          }
          const fresh = () =>
            mode === "add" ? uploadStorage(gpu, y0) : poisonedF32(gpu, (rows + SPARE) * N);
          const spare = mode === "add" ? y0 : new Float32Array((rows + SPARE) * N).fill(NaN);
          const { want, tol } = reference(x, g.exact, w.exact, { rows, K, N, eps, mode }, y0);
          const outputs: Float32Array[] = [];
          for (const weights of layouts) {
            const y = fresh();
            run(gpu, bindMatmul(gpu, { x: xb, w: weights, y, K, N, mode, norm }), rows);
            const got = await readF32(gpu, y, (rows + SPARE) * N);
            checkOutputs(got, want, tol, spare, `${what} ${weights.constructor.name}`);
            outputs.push(got);
            y.destroy();
          }
          if (outputs.length === 2) {
            assertEquals(
              new Uint32Array(outputs[1].buffer),
              new Uint32Array(outputs[0].buffer),
              `${what}: texture and storage differ`,
            );
          }
          if (rows > 1) {
            // Row 0 alone (the 1-row tile) gives the bits it has in the batch.
            const y = fresh();
            run(gpu, bindMatmul(gpu, { x: xb, w: layouts[0], y, K, N, mode, norm }), 1);
            const alone = await readF32(gpu, y, N);
            assertEquals(
              new Uint32Array(alone.buffer),
              new Uint32Array(outputs[0].buffer, 0, N),
              `${what}: row 0 alone differs from row 0 in the batch`,
            );
            y.destroy();
          }
          for (const b of [xb, gb, ...layouts]) b.destroy();
        });
      }
    }
  });
}

Deno.test("matmul with a fused rmsnorm: rejects a bad eps", async () => {
  const { gpu } = (await testGpus())[0];
  const b = uploadStorage(gpu, new Float32Array(64));
  for (const eps of [-1, NaN]) {
    assertThrows(
      () =>
        bindMatmul(gpu, { x: b, w: b, y: b, K: 8, N: 4, mode: "store", norm: { gain: b, eps } }),
      RangeError,
    );
  }
  b.destroy();
});
