// Qwen3's per-head q and k RMSNorm against float64, on both dtype paths, with fresh random data
// (rerun a failure with SLUICE_TEST_SEED=<seed>).
//
// Bound: as rmsnorm's (kernels_dense_test.ts): a sum of squares over headDim values, a sqrt and two
// products in f32, observed ~2e-7 relative to the largest output; 2e-6 leaves room. The reference
// uses the weights as stored (f16-rounded on the f16 path). The v heads, and rows past the batch,
// must come back unchanged.

import type { Gpu } from "../../../../engine/gpu/device.ts";
import { readF32, uploadStorage } from "../../../../engine/gpu/buffers.ts";
import { bindQkNorm } from "../../../../engine/gpu/kernels/qk_norm.ts";
import { f16BitsToF32, toF16Array } from "../../../../engine/quant/half.ts";
import { rmsNorm } from "../../../helpers/reference_llama.ts";
import { assertClose } from "../../../helpers/compare.ts";
import { testGpus } from "../../../helpers/gpu.ts";
import { randomArray, rng, testSeed } from "../../../helpers/random.ts";
import { assertEquals } from "../../../helpers/testing.ts";

const QK_NORM_BOUND = 2e-6;
/** [numHeads, numKvHeads, headDim, rows]: GQA, MHA, odd head counts and dims, heads past a lane group. */
const SHAPES: [number, number, number, number][] = [
  [4, 2, 16, 3],
  [3, 3, 10, 1],
  [7, 1, 6, 5],
  [16, 4, 128, 2],
  [2, 2, 2, 9],
];
const SPARE = 2;
const EPS = 1e-6;

function uploadW(gpu: Gpu, values: Float64Array): { buffer: GPUBuffer; values: Float64Array } {
  if (gpu.f16) {
    const bits = toF16Array(values);
    return { buffer: uploadStorage(gpu, bits), values: Float64Array.from(bits, f16BitsToF32) };
  }
  const f32 = Float32Array.from(values);
  return { buffer: uploadStorage(gpu, f32), values: Float64Array.from(f32) };
}

Deno.test("qk norm: each q and k head normalized as float64, v heads untouched", async (t) => {
  for (const { label, gpu } of await testGpus()) {
    for (const [Hq, Hkv, hd, rows] of SHAPES) {
      await t.step(`${label} Hq=${Hq} Hkv=${Hkv} hd=${hd} rows=${rows}`, async () => {
        const seed = testSeed();
        const next = rng(seed);
        const width = (Hq + 2 * Hkv) * hd;
        const x = Float32Array.from(randomArray(next, (rows + SPARE) * width, 2));
        const wValues = Float64Array.from(randomArray(next, 2 * hd, 0.5), (v) => 1 + v);
        const w = uploadW(gpu, wValues);
        const xBuffer = uploadStorage(gpu, x);
        const kernel = bindQkNorm(gpu, {
          qkv: xBuffer,
          w: w.buffer,
          numHeads: Hq,
          numKvHeads: Hkv,
          headDim: hd,
          eps: EPS,
        });
        const encoder = gpu.device.createCommandEncoder();
        const pass = encoder.beginComputePass();
        kernel.encode(pass, rows);
        pass.end();
        gpu.device.queue.submit([encoder.finish()]);
        const got = await readF32(gpu, xBuffer, (rows + SPARE) * width);

        const want = Float64Array.from(x);
        const qW = w.values.subarray(0, hd), kW = w.values.subarray(hd);
        for (let m = 0; m < rows; m++) {
          for (let h = 0; h < Hq + Hkv; h++) {
            const at = m * width + h * hd;
            want.set(
              rmsNorm(Float64Array.from(x.subarray(at, at + hd)), h < Hq ? qW : kW, EPS),
              at,
            );
          }
        }
        assertClose(got, want, QK_NORM_BOUND, `${label} seed ${seed}`);
        for (let m = 0; m < rows; m++) {
          const v = m * width + (Hq + Hkv) * hd;
          assertEquals([...got.subarray(v, (m + 1) * width)], [...x.subarray(v, (m + 1) * width)]);
        }
        assertEquals([...got.subarray(rows * width)], [...x.subarray(rows * width)]);
        xBuffer.destroy();
        w.buffer.destroy();
      });
    }
  }
});
