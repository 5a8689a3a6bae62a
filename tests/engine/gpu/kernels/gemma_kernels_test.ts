// Gemma 3's kernel options against float64 references, on both dtype paths where they read
// weights (rerun a failure with SLUICE_TEST_SEED=<seed>): GeGLU (the GELU-tanh gate of the float
// and the quantized glu matmul), the residual norm after attention and the MLP
// (residual_norm.wgsl), and the embedding's scale (float and quantized tables). The attention
// score scale is a case of attention_test.ts.
//
// Bounds, relative to the largest |reference| (helpers/compare.ts) unless stated: GeGLU as the
// matmul's f32 accumulation (1e-5, kernels_dense_test.ts's); the residual norm 1e-6 (a sum of D
// squares and three products in f32); the embedding's scale exact (one f32 product of exact
// values, compared with the f32-rounded product).

import type { Gpu } from "../../../../engine/gpu/device.ts";
import type { BoundKernel } from "../../../../engine/gpu/kernel.ts";
import { readF32, uploadStorage } from "../../../../engine/gpu/buffers.ts";
import { f16BitsToF32, toF16Array } from "../../../../engine/quant/half.ts";
import { bindMatmul } from "../../../../engine/gpu/kernels/matmul.ts";
import { bindQuantMatmul } from "../../../../engine/gpu/kernels/matmul_quant.ts";
import { bindResidualNorm } from "../../../../engine/gpu/kernels/residual_norm.ts";
import { bindEmbedding } from "../../../../engine/gpu/kernels/embedding.ts";
import { bindQuantEmbedding } from "../../../../engine/gpu/kernels/embedding_quant.ts";
import { packQuantPart } from "../../../../engine/gpu/kernels/quant_layout.ts";
import { dequantize, quantize } from "../../../../engine/quant/formats.ts";
import { assertClose } from "../../../helpers/compare.ts";
import { poisonedF32, testGpu, testGpus } from "../../../helpers/gpu.ts";
import { randomArray, rng, testSeed } from "../../../helpers/random.ts";
import { assert, assertEquals } from "../../../helpers/testing.ts";

/** transformers' gelu_pytorch_tanh, in float64. */
function geluTanh(x: number): number {
  return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
}

/** Weights as the GPU holds them (f16 or f32) and the exact values held. */
function uploadW(gpu: Gpu, values: ArrayLike<number>): { buffer: GPUBuffer; values: Float64Array } {
  if (gpu.f16) {
    const bits = toF16Array(values);
    return { buffer: uploadStorage(gpu, bits), values: Float64Array.from(bits, f16BitsToF32) };
  }
  const f32 = Float32Array.from(values);
  return { buffer: uploadStorage(gpu, f32), values: Float64Array.from(f32) };
}

function run(gpu: Gpu, kernel: BoundKernel, rows: number): void {
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  kernel.encode(pass, rows);
  pass.end();
  gpu.device.queue.submit([encoder.finish()]);
}

/** y = gelu_tanh(x · gateᵀ) * (x · upᵀ) in float64; w is [2N, K], gate rows first. */
function gegluRef(x: Float32Array, w: ArrayLike<number>, rows: number, K: number, N: number) {
  const y = new Float64Array(rows * N);
  const dot = (m: number, n: number) => {
    let s = 0;
    for (let k = 0; k < K; k++) s += x[m * K + k] * w[n * K + k];
    return s;
  };
  for (let m = 0; m < rows; m++) {
    for (let n = 0; n < N; n++) y[m * N + n] = geluTanh(dot(m, n)) * dot(m, N + n);
  }
  return y;
}

// [K, N, rows]: vector path (1-, 4- and 8-row tiles), scalar path (odd sizes).
const GLU_SHAPES: [number, number, number][] = [[64, 40, 1], [256, 96, 3], [48, 28, 6], [
  13,
  7,
  5,
]];

Deno.test("matmul glu gelu_tanh (GeGLU): matches float64 on both dtype paths, no NaN at large gates", async (t) => {
  for (const { label, gpu } of await testGpus()) {
    for (const [K, N, rows] of GLU_SHAPES) {
      await t.step(`${label} K=${K} N=${N} rows=${rows}`, async () => {
        const seed = testSeed();
        const next = rng(seed);
        // Some rows large enough that the gate's argument reaches ±100 and beyond (tanh's inf/inf
        // in a naive formula), the others ordinary.
        const x = Float32Array.from(
          randomArray(next, rows * K),
          (v, i) => Math.floor(i / K) % 2 ? v * 40 : v,
        );
        const w = uploadW(gpu, randomArray(next, 2 * N * K, 0.5));
        const y = poisonedF32(gpu, rows * N);
        run(
          gpu,
          bindMatmul(gpu, {
            x: uploadStorage(gpu, x),
            w: w.buffer,
            y,
            K,
            N,
            mode: "glu",
            activation: "gelu_tanh",
          }),
          rows,
        );
        const got = await readF32(gpu, y, rows * N);
        assert(got.every(Number.isFinite), "a non-finite output");
        assertClose(got, gegluRef(x, w.values, rows, K, N), 1e-5, `${label} seed ${seed}`);
      });
    }
  }
});

Deno.test("matmul_quant glu gelu_tanh: Q8_0 and Q4_K match float64 of the dequantized weights", async () => {
  const gpu = await testGpu();
  for (const type of ["q8_0", "q4_k"] as const) {
    const seed = testSeed();
    const next = rng(seed);
    const K = 256, N = 24, rows = 1;
    const x = Float32Array.from(randomArray(next, rows * K));
    const ggml = quantize(type, Float32Array.from(randomArray(next, 2 * N * K, 0.5)));
    const values = dequantize(type, ggml, 2 * N * K);
    const y = poisonedF32(gpu, rows * N);
    run(
      gpu,
      bindQuantMatmul(gpu, {
        x: uploadStorage(gpu, x),
        w: uploadStorage(gpu, packQuantPart(type, ggml, 2 * N, K)),
        y,
        K,
        N,
        mode: "glu",
        type,
        activation: "gelu_tanh",
      }),
      rows,
    );
    const got = await readF32(gpu, y, rows * N);
    assertClose(got, gegluRef(x, values, rows, K, N), 1e-5, `${type} seed ${seed}`);
  }
});

Deno.test("residual_norm: y += rmsnorm(x) · w matches float64 on both dtype paths", async (t) => {
  for (const { label, gpu } of await testGpus()) {
    // Gemma 3 270M's width, a K-quant row, odd ones; 1 to 33 rows (one workgroup each).
    for (const [D, rows] of [[640, 3], [256, 33], [7, 5], [1, 1], [130, 2]]) {
      await t.step(`${label} D=${D} rows=${rows}`, async () => {
        const seed = testSeed();
        const next = rng(seed);
        const eps = 1e-6;
        const x = Float32Array.from(randomArray(next, rows * D, 3));
        const y0 = Float32Array.from(randomArray(next, rows * D, 5));
        const w = uploadW(gpu, randomArray(next, D).map((v) => 1 + 0.1 * v));
        const y = uploadStorage(gpu, y0);
        run(
          gpu,
          bindResidualNorm(gpu, { x: uploadStorage(gpu, x), y, w: w.buffer, D, eps }),
          rows,
        );
        const got = await readF32(gpu, y, rows * D);
        const want = new Float64Array(rows * D);
        for (let m = 0; m < rows; m++) {
          let sq = 0;
          for (let i = 0; i < D; i++) sq += x[m * D + i] ** 2;
          const scale = 1 / Math.sqrt(sq / D + eps);
          for (let i = 0; i < D; i++) {
            want[m * D + i] = y0[m * D + i] + x[m * D + i] * scale * w.values[i];
          }
        }
        assertClose(got, want, 1e-6, `${label} D=${D} seed ${seed}`);
      });
    }
  }
});

Deno.test("embedding scale: float and quantized tables times √hidden equal the f32 products", async () => {
  for (const { label, gpu } of await testGpus()) {
    const seed = testSeed();
    const next = rng(seed);
    const D = 64, vocab = 9, scale = Math.fround(Math.sqrt(640));
    const ids = [3, 0, 8, 3];
    const tokens = uploadStorage(gpu, Uint32Array.from(ids));
    const rowSlot = uploadStorage(gpu, new Uint32Array(ids.length));
    const nextIds = uploadStorage(gpu, new Uint32Array(1));
    const args = { tokens, rowSlot, nextIds, D, rowStart: 0, rowCount: vocab, scale };
    const table = uploadW(gpu, randomArray(next, vocab * D));
    const y = poisonedF32(gpu, ids.length * D);
    run(gpu, bindEmbedding(gpu, { ...args, table: table.buffer, y }), ids.length);
    const got = await readF32(gpu, y, ids.length * D);
    ids.forEach((id, m) => {
      for (let i = 0; i < D; i++) {
        assertEquals(got[m * D + i], Math.fround(table.values[id * D + i] * scale), `${label}`);
      }
    });
    if (!gpu.f16) continue;
    const ggml = quantize("q8_0", Float32Array.from(randomArray(next, vocab * D)));
    const values = dequantize("q8_0", ggml, vocab * D);
    const yq = poisonedF32(gpu, ids.length * D);
    run(
      gpu,
      bindQuantEmbedding(gpu, {
        ...args,
        table: uploadStorage(gpu, packQuantPart("q8_0", ggml, vocab, D)),
        y: yq,
        type: "q8_0",
      }),
      ids.length,
    );
    const gotq = await readF32(gpu, yq, ids.length * D);
    ids.forEach((id, m) => {
      for (let i = 0; i < D; i++) {
        assertEquals(gotq[m * D + i], Math.fround(values[id * D + i] * scale), "q8_0");
      }
    });
  }
});
