// The bias add (Qwen2's q, k, v biases on the fused qkv rows) against float64, on both dtype paths,
// with fresh random data (rerun a failure with SLUICE_TEST_SEED=<seed>).
//
// Bound: the reference adds the bias as stored (f16-rounded on the f16 path) to the f32 input, so
// the only error is the one f32 rounding of the sum: 2^-24 relative to each |x + b|, below 1e-7 of
// the largest. Rows past the batch must come back unchanged.

import type { Gpu } from "../../../../engine/gpu/device.ts";
import { readF32, uploadStorage } from "../../../../engine/gpu/buffers.ts";
import { bindBiasAdd } from "../../../../engine/gpu/kernels/bias_add.ts";
import { f16BitsToF32, toF16Array } from "../../../../engine/quant/half.ts";
import { assertClose } from "../../../helpers/compare.ts";
import { testGpus } from "../../../helpers/gpu.ts";
import { randomArray, rng, testSeed } from "../../../helpers/random.ts";
import { assertEquals } from "../../../helpers/testing.ts";

const BIAS_BOUND = 1e-7;
/** [width, rows]: widths below, at and past one workgroup of 64, odd ones; one and many rows. */
const SHAPES: [number, number][] = [[1, 1], [7, 3], [64, 2], [200, 5], [333, 17]];
const SPARE = 2;

/** The bias stored as W: its buffer and the exact values it holds (f16 rows padded to 4 bytes). */
function uploadBias(gpu: Gpu, values: Float64Array): { buffer: GPUBuffer; values: Float64Array } {
  if (gpu.f16) {
    const bits = toF16Array(values);
    const padded = new Uint16Array(bits.length + (bits.length % 2));
    padded.set(bits);
    return { buffer: uploadStorage(gpu, padded), values: Float64Array.from(bits, f16BitsToF32) };
  }
  const f32 = Float32Array.from(values);
  return { buffer: uploadStorage(gpu, f32), values: Float64Array.from(f32) };
}

Deno.test("bias add: matches float64 on both dtype paths, rows past the batch untouched", async (t) => {
  for (const { label, gpu } of await testGpus()) {
    for (const [width, rows] of SHAPES) {
      await t.step(`${label} width=${width} rows=${rows}`, async () => {
        const seed = testSeed();
        const next = rng(seed);
        const x = Float32Array.from(randomArray(next, (rows + SPARE) * width, 3));
        const b = uploadBias(gpu, randomArray(next, width, 0.5));
        const xBuffer = uploadStorage(gpu, x);
        const kernel = bindBiasAdd(gpu, { x: xBuffer, b: b.buffer, width });
        const encoder = gpu.device.createCommandEncoder();
        const pass = encoder.beginComputePass();
        kernel.encode(pass, rows);
        pass.end();
        gpu.device.queue.submit([encoder.finish()]);
        const got = await readF32(gpu, xBuffer, (rows + SPARE) * width);
        const want = Float64Array.from(
          x.subarray(0, rows * width),
          (v, i) => v + b.values[i % width],
        );
        assertClose(got.subarray(0, rows * width), want, BIAS_BOUND, `${label} seed ${seed}`);
        assertEquals([...got.subarray(rows * width)], [...x.subarray(rows * width)]);
        xBuffer.destroy();
        b.buffer.destroy();
      });
    }
  }
});
