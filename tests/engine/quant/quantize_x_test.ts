// quantize_x (engine/gpu/kernels/quantize_x.ts): activations to int8 blocks of 32 with a scale and a
// sum each, with and without the RMSNorm fused in, against float64 (rerun a failure with
// SLUICE_TEST_SEED=<seed>).
//
// Per block, with v the float64 values it stands for (x, or x · gain / rms(x) with the norm) and
// d the kernel's scale:
// - d = max|v| / 127 within (scaleBound(K) + 4 · 2^-24) relative (the f32 gain product, the
//   division, the norm's scale; exact without the norm but for the division);
// - each quant is v / d rounded to the nearest: |q - v/d| <= 1/2 + 2^-12 (a wrong rounding or a
//   swapped byte is off by at least 1/2 more), |q| <= 127, and the block's largest |v| gets 127;
// - s is exactly fl(d · Σq), the sum the quants hold;
// - an all-zero block is d = s = 0, q = 0; rows past the step's keep what they held; and a row's
//   bytes do not depend on the rows beside it.

import type { Gpu } from "../../../engine/gpu/device.ts";
import { readBack, uploadStorage, writeBytes } from "../../../engine/gpu/buffers.ts";
import {
  bindQuantizeX,
  createQuantizedX,
  destroyQuantizedX,
  type QuantizedX,
} from "../../../engine/gpu/kernels/quantize_x.ts";
import type { BoundKernel } from "../../../engine/gpu/kernel.ts";
import { f16BitsToF32, toF16Array } from "../../../engine/quant/half.ts";
import { normedRows, scaleBound } from "../../helpers/fused_norm_reference.ts";
import { testGpus } from "../../helpers/gpu.ts";
import { randomArray, rng, testSeed } from "../../helpers/random.ts";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";

const SPARE = 2;
const FILL = 0xa5;

function run(gpu: Gpu, kernel: BoundKernel, rows: number): void {
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  kernel.encode(pass, rows);
  pass.end();
  gpu.device.queue.submit([encoder.finish()]);
}

/** A scratch for `rows` rows of K, every byte FILL, so a write past the step's rows shows. */
function filledScratch(gpu: Gpu, rows: number, K: number): QuantizedX {
  const out = createQuantizedX(gpu, rows * K);
  writeBytes(gpu, out.q, 0, new Uint8Array(rows * K).fill(FILL));
  writeBytes(gpu, out.s, 0, new Uint8Array((rows * K) / 4).fill(FILL));
  return out;
}

async function readScratch(gpu: Gpu, out: QuantizedX, values: number) {
  return {
    q: new Int8Array(await readBack(gpu, out.q, values)),
    s: new Float32Array(await readBack(gpu, out.s, (values / 32) * 8)),
    bytes: new Uint8Array(await readBack(gpu, out.q)),
    sBytes: new Uint8Array(await readBack(gpu, out.s)),
  };
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

/** [K, rows, eps or null (no norm)]: one block, an odd number of blocks, a wide row. */
const SHAPES: [number, number, number | null][] = [
  [32, 1, null],
  [544, 5, 1e-5],
  [1536, 3, null],
  [96, 4, 0.25],
];

for (const { label, gpu: gpuOf } of [{ label: "f32", gpu: 0 }, { label: "f16", gpu: 1 }]) {
  Deno.test(`quantize_x (${label} gain): scales, quants and sums against float64`, async (t) => {
    const gpus = await testGpus();
    if (gpuOf >= gpus.length) return; // no shader-f16 on this adapter
    const gpu = gpus[gpuOf].gpu;
    for (const [K, rows, eps] of SHAPES) {
      await t.step(
        `K=${K} rows=${rows} ${eps === null ? "no norm" : `norm eps=${eps}`}`,
        async () => {
          const seed = testSeed();
          const next = rng(seed);
          const what = `K=${K} rows=${rows} seed=${seed}`;
          // Magnitudes varying by block, and one all-zero block in row 0.
          const x = Float32Array.from(
            randomArray(next, rows * K, 3),
            (v, i) => v * (1 + ((i >> 5) % 5)),
          );
          if (K > 32) {
            x.fill(0, 32, 64);
          }
          const xb = uploadStorage(gpu, x);
          const gain = eps === null ? null : gainOf(gpu, randomArray(next, K, 1.5));
          const norm = gain && eps !== null ? { gain: gain.buffer, eps } : undefined;
          const out = filledScratch(gpu, rows + SPARE, K);
          run(gpu, bindQuantizeX(gpu, { x: xb, out, K, norm }), rows);
          const got = await readScratch(gpu, out, rows * K);

          const v = norm ? normedRows(x, gain!.exact, rows, K, eps!) : null;
          const value = (m: number, k: number) =>
            v ? v.gained[m * K + k] * v.scale[m] : x[m * K + k];
          const dTol = (norm ? scaleBound(K) : 0) + 4 * 2 ** -24;
          for (let m = 0; m < rows; m++) {
            for (let b = 0; b < K / 32; b++) {
              const block = m * (K / 32) + b;
              const d = got.s[2 * block], s = got.s[2 * block + 1];
              let amax = 0, sum = 0, top = 0;
              for (let j = 0; j < 32; j++) {
                const a = Math.abs(value(m, 32 * b + j));
                if (a > amax) (amax = a), (top = j);
              }
              const where = `${what}: row ${m} block ${b}`;
              if (amax === 0) {
                assertEquals([d, s], [0, 0], `${where}: a zero block's d and s`);
              } else if (!(Math.abs(d - amax / 127) <= dTol * (amax / 127))) {
                throw new Error(`${where}: d ${d}, want ${amax / 127}`);
              }
              for (let j = 0; j < 32; j++) {
                const q = got.q[m * K + 32 * b + j];
                sum += q;
                const want = amax === 0 ? 0 : value(m, 32 * b + j) / d;
                if (!(Math.abs(q - want) <= 0.5 + 2 ** -12) || Math.abs(q) > 127) {
                  throw new Error(`${where} value ${j}: q ${q}, want round(${want})`);
                }
              }
              if (amax > 0) assertEquals(Math.abs(got.q[m * K + 32 * b + top]), 127, where);
              assertEquals(s, Math.fround(d * sum), `${where}: s is not fl(d · Σq)`);
            }
          }
          // The spare rows hold the fill; row 0 alone writes the bytes it wrote in the batch.
          assert(got.bytes.subarray(rows * K).every((byte) => byte === FILL), `${what}: spare q`);
          assert(
            got.sBytes.subarray(rows * K / 4).every((byte) => byte === FILL),
            `${what}: spare s`,
          );
          const alone = filledScratch(gpu, rows + SPARE, K);
          run(gpu, bindQuantizeX(gpu, { x: xb, out: alone, K, norm }), 1);
          const one = await readScratch(gpu, alone, K);
          assertEquals(one.q, got.q.slice(0, K), `${what}: row 0 alone, q`);
          assertEquals(one.s, got.s.slice(0, K / 16), `${what}: row 0 alone, s`);
          for (const o of [out, alone]) destroyQuantizedX(o);
          xb.destroy();
          gain?.buffer.destroy();
        },
      );
    }
  });
}

Deno.test("quantize_x refuses partial blocks and rows past its scratch", async () => {
  const gpu = (await testGpus())[0].gpu;
  const x = uploadStorage(gpu, new Float32Array(64));
  const out = createQuantizedX(gpu, 64);
  assertThrows(() => bindQuantizeX(gpu, { x, out, K: 48 }), /whole blocks/);
  assertThrows(() => createQuantizedX(gpu, 40), /whole blocks/);
  assertThrows(() => bindQuantizeX(gpu, { x, out, K: 32, norm: { gain: x, eps: NaN } }), /eps/);
  const kernel = bindQuantizeX(gpu, { x, out, K: 32 });
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  assertThrows(() => kernel.encode(pass, 3), /exceed its scratch/);
  pass.end();
  encoder.finish();
  destroyQuantizedX(out);
  x.destroy();
});
