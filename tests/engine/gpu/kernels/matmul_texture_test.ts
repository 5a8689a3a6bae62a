// The matmul with its weights in a texture (engine/gpu/weight_texture.ts) against float64, and
// against the same matmul reading the same bytes from a storage buffer, on both dtype paths (rerun
// a failure with SLUICE_TEST_SEED=<seed>).
//
// Bound: 1e-5 relative to the largest |reference| value, as for the storage matmul
// (kernels_dense_test.ts): the f16 path's reference uses the f16-rounded weights, so both paths
// differ from float64 only by f32 accumulation (observed ~1e-6 at K=576). Beyond the bound, the
// texture kernel must give the storage kernel's bits exactly: the same arithmetic on the same words.

import type { Gpu } from "../../../../engine/gpu/device.ts";
import { createStorage, readF32, uploadStorage } from "../../../../engine/gpu/buffers.ts";
import { bindMatmul, type MatmulMode } from "../../../../engine/gpu/kernels/matmul.ts";
import {
  createWeightTexture,
  TEXTURE_WIDTH,
  textureWordsSource,
  writeTextureBytes,
} from "../../../../engine/gpu/weight_texture.ts";
import { f16BitsToF32, toF16Array } from "../../../../engine/quant/half.ts";
import { assertClose } from "../../../helpers/compare.ts";
import { poisonedF32, testGpus } from "../../../helpers/gpu.ts";
import { randomArray, rng, testSeed } from "../../../helpers/random.ts";
import { assert, assertEquals, assertThrows } from "../../../helpers/testing.ts";

const MATMUL_BOUND = 1e-5;
const SPARE = 2;

/**
 * [K, N, rows]: rows 1, 3, 16 and 19 reach the 1-, 4- and 16-row tiles (19: a full 16-row tile and
 * a partial one); N=196 leaves lanes whose quads are clamped; K=576 with N=200 spans several
 * texture rows (72 words per weight row), so weight rows straddle texture rows.
 */
const SHAPES: [number, number, number][] = [
  [64, 40, 1],
  [576, 200, 3],
  [48, 196, 16],
  [96, 24, 19],
];

/** W's bytes (f16 or f32 as the path stores them) and the exact values they hold. */
function weightBytes(
  gpu: Gpu,
  values: ArrayLike<number>,
): { bytes: Uint8Array; exact: Float64Array } {
  if (gpu.f16) {
    const bits = toF16Array(values);
    return { bytes: new Uint8Array(bits.buffer), exact: Float64Array.from(bits, f16BitsToF32) };
  }
  const f32 = Float32Array.from(values);
  return { bytes: new Uint8Array(f32.buffer), exact: Float64Array.from(f32) };
}

/** A texture of `bytes`, written in uneven chunks (as the loader streams rows) to test the writer. */
function textureOf(gpu: Gpu, bytes: Uint8Array, chunk: number): GPUTexture {
  const texture = createWeightTexture(gpu, bytes.byteLength);
  for (let at = 0; at < bytes.byteLength; at += chunk) {
    writeTextureBytes(gpu, texture, at, bytes.subarray(at, Math.min(at + chunk, bytes.byteLength)));
  }
  return texture;
}

function reference(
  x: Float32Array,
  w: Float64Array,
  rows: number,
  K: number,
  N: number,
  mode: MatmulMode,
): Float64Array {
  const dot = (m: number, n: number) => {
    let s = 0;
    for (let k = 0; k < K; k++) s += x[m * K + k] * w[n * K + k];
    return s;
  };
  const y = new Float64Array(rows * N);
  for (let m = 0; m < rows; m++) {
    for (let n = 0; n < N; n++) {
      const g = dot(m, n);
      y[m * N + n] = mode === "glu" ? (g / (1 + Math.exp(-g))) * dot(m, N + n) : g;
    }
  }
  return y;
}

function run(gpu: Gpu, kernel: ReturnType<typeof bindMatmul>, rows: number): void {
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  kernel.encode(pass, rows);
  pass.end();
  gpu.device.queue.submit([encoder.finish()]);
}

for (const mode of ["store", "add", "glu"] as const) {
  Deno.test(`matmul from a texture, ${mode}: float64 and the storage kernel's bits`, async (t) => {
    for (const { label, gpu } of await testGpus()) {
      for (const [K, N, rows] of SHAPES) {
        await t.step(`${label} K=${K} N=${N} rows=${rows}`, async () => {
          const seed = testSeed();
          const next = rng(seed);
          const x = Float32Array.from(randomArray(next, rows * K));
          const xBuffer = uploadStorage(gpu, x);
          const w = weightBytes(gpu, randomArray(next, (mode === "glu" ? 2 : 1) * N * K, 0.5));
          // Chunks of 7 weight rows: not a multiple of a texture row's words.
          const texture = textureOf(gpu, w.bytes, 7 * K * (gpu.f16 ? 2 : 4));
          const storage = uploadStorage(gpu, w.bytes);
          const want = reference(x, w.exact, rows, K, N, mode);
          const outputs: Float32Array[] = [];
          const residual = Float32Array.from(randomArray(next, (rows + SPARE) * N, 4));
          for (const weights of [texture, storage]) {
            const y = mode === "add"
              ? uploadStorage(gpu, residual)
              : poisonedF32(gpu, (rows + SPARE) * N);
            run(gpu, bindMatmul(gpu, { x: xBuffer, w: weights, y, K, N, mode }), rows);
            outputs.push(await readF32(gpu, y, (rows + SPARE) * N));
            y.destroy();
          }
          if (mode === "add") { for (let i = 0; i < want.length; i++) want[i] += residual[i]; }
          const [got, fromStorage] = outputs;
          const what = `${label} ${mode} K=${K} N=${N} rows=${rows} seed=${seed}`;
          assertClose(got.subarray(0, rows * N), want, MATMUL_BOUND, what);
          assertEquals(
            new Uint32Array(got.buffer),
            new Uint32Array(fromStorage.buffer),
            `${what}: texture and storage kernels differ`,
          );
          // Rows past the batch keep their values (NaN poison or the residual).
          const spare = got.subarray(rows * N);
          const before = mode === "add" ? residual.subarray(rows * N) : null;
          spare.forEach((v, i) =>
            assert(before ? Object.is(v, before[i]) : Number.isNaN(v), `${what}: spare row written`)
          );
          texture.destroy();
          storage.destroy();
          xBuffer.destroy();
        });
      }
    }
  });
}

Deno.test("matmul from a texture: a poisoned weight gives NaN, never a pass", async () => {
  for (const { label, gpu } of await testGpus()) {
    const [K, N, rows] = [64, 8, 1];
    const w = weightBytes(gpu, randomArray(rng(testSeed()), N * K));
    // A NaN in the last weight of row 5: output 5 must be NaN, the others finite.
    if (gpu.f16) new Uint16Array(w.bytes.buffer)[5 * K + K - 1] = 0x7e00;
    else new Float32Array(w.bytes.buffer)[5 * K + K - 1] = NaN;
    const texture = textureOf(gpu, w.bytes, w.bytes.byteLength);
    const x = uploadStorage(gpu, new Float32Array(rows * K).fill(1));
    const y = createStorage(gpu, rows * N * 4);
    run(gpu, bindMatmul(gpu, { x, w: texture, y, K, N, mode: "store" }), rows);
    const got = await readF32(gpu, y, rows * N);
    assert(Number.isNaN(got[5]), `${label}: the NaN weight did not reach its output`);
    assert(got.every((v, i) => i === 5 || Number.isFinite(v)), `${label}: NaN leaked`);
  }
});

Deno.test("weight textures: the words land in order across texture rows", () => {
  // The shader reads word i at (i % WIDTH, i / WIDTH); the writer must put byte offsets there.
  assertEquals(TEXTURE_WIDTH & (TEXTURE_WIDTH - 1), 0);
  const src = "@group(0) @binding(2) var<storage, read> wv: array<vec4<u32>>;\n" +
    "fn wv_word(i: u32) -> vec4<u32> { return wv[i]; }\n";
  const swapped = textureWordsSource(src, "wv");
  assert(swapped.includes("@group(0) @binding(2) var wv_texture: texture_2d<u32>;"), swapped);
  assert(!swapped.includes("var<storage"), swapped);
  assertThrows(() => textureWordsSource(src, "wq"));
});

Deno.test("matmul from a texture: shapes off the vector path are refused", async () => {
  for (const { gpu } of await testGpus()) {
    const texture = createWeightTexture(gpu, 13 * 7 * 4);
    const x = createStorage(gpu, 13 * 4), y = createStorage(gpu, 7 * 4);
    assertThrows(() => bindMatmul(gpu, { x, w: texture, y, K: 13, N: 7, mode: "store" }));
    texture.destroy();
  }
});
