// The quantized matmul with an RMSNorm fused into its x loads (engine/gpu/kernels/fused_norm.ts)
// against a float64 rmsnorm-then-matmul of the dequantized weights, for every format and mode, x
// through a uniform and a storage binding, weights in a storage buffer and in a texture (rerun a
// failure with SLUICE_TEST_SEED=<seed>).
//
// Bound, per output of row m, as in matmul_quant_texture_test.ts on the gained x' = x·g (the gain
// f16-rounded where the path stores f16): with s_m the row's norm scale and M_k the largest |w| of
// k's 16-value half-chunk, |got - want| <= 2^-16 · s_m · Σ_k |x'_k| (|w_k| + 2 M_k) (the kernel
// sums a·Σx'·q + b·Σx' per half) + scaleBound(K) · s_m · Σ_k |x'_k w_k| (the f32 scale); add adds
// 2^-23 |want|, glu combines its factors' bounds with silu's slope (<= 1.1) and 2^-20 |want|. eps is
// 1e-5 or 0.25 by shape, so an eps in the wrong place fails. Beyond the bound, the two bindings
// must give the same bits, and (16-row tile) a row alone the bits it has in a 19-row batch.

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
import { f16BitsToF32, toF16Array } from "../../../../engine/quant/half.ts";
import { modeOutputs, normedRows, scaleBound } from "../../../helpers/fused_norm_reference.ts";
import { poisonedF32, testGpu } from "../../../helpers/gpu.ts";
import { randomArray, rng, testSeed } from "../../../helpers/random.ts";
import { assertEquals } from "../../../helpers/testing.ts";
import { everyOther, TALL_TYPES } from "../../../helpers/quant_plan.ts";

const QUANT_BOUND = 2 ** -16;
const SPARE = 2;
/**
 * [K, N, rows, eps] in whole blocks, sampled as tests/helpers/quant_plan.ts says: odd N; store (and
 * add, on its pipeline) at the 1-row tile, glu at the 4-row one for every other format, and the
 * other way round for the rest; 19 rows (the 16-row tile, a full and a partial one) in store for
 * TALL_TYPES. Each runs with weights in storage and x in a uniform, and from a texture with x in
 * storage (the 19-row case: from storage with x in storage).
 */
function shapes(
  type: QuantType,
  mode: MatmulMode,
): [number, number, number, number][] {
  const B = QUANT_FORMATS[type].blockElems;
  const one: [number, number, number, number] = [B, 7, 1, 1e-5];
  const four: [number, number, number, number] = [3 * B, 37, 3, 0.25];
  const first = (mode === "glu") === everyOther(type) ? four : one;
  const tall: [number, number, number, number][] = mode === "store" && TALL_TYPES.includes(type)
    ? [[2 * B, 24, 19, 0.25]]
    : [];
  return [first, ...tall];
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
  gain: Float64Array,
  w: Float32Array,
  shape: { rows: number; K: number; N: number; eps: number; mode: MatmulMode },
  y0: Float32Array,
) {
  const { rows, K, N, eps, mode } = shape;
  const { gained, scale } = normedRows(x, gain, rows, K, eps);
  const halfMax = new Float32Array(w.length);
  for (let i = 0; i < w.length; i += 16) {
    let m = 0;
    for (let j = 0; j < 16; j++) m = Math.max(m, Math.abs(w[i + j]));
    halfMax.fill(m, i, i + 16);
  }
  const dot = (m: number, n: number) => {
    let sum = 0, quant = 0, abs = 0;
    for (let k = 0; k < K; k++) {
      const i = n * K + k, v = gained[m * K + k];
      sum += v * w[i];
      quant += Math.abs(v) * (Math.abs(w[i]) + 2 * halfMax[i]);
      abs += Math.abs(v * w[i]);
    }
    const s = scale[m];
    return { sum: s * sum, tol: s * (QUANT_BOUND * quant + scaleBound(K) * abs) };
  };
  return modeOutputs(rows, N, mode, y0, dot);
}

/** The gain as W (f16 or f32 as the path stores it) and the exact values it holds. */
function gainOf(gpu: Gpu, values: ArrayLike<number>): { buffer: GPUBuffer; exact: Float64Array } {
  if (gpu.f16) {
    const bits = toF16Array(values);
    return { buffer: uploadStorage(gpu, bits), exact: Float64Array.from(bits, f16BitsToF32) };
  }
  const f32 = Float32Array.from(values);
  return { buffer: uploadStorage(gpu, f32), exact: Float64Array.from(f32) };
}

for (const type of QUANT_TYPES) {
  Deno.test(`matmul_quant ${type} with a fused rmsnorm: float64, both bindings' bits`, async (t) => {
    const gpu = await testGpu();
    for (const mode of ["store", "add", "glu"] as const) {
      for (const [K, N, rows, eps] of shapes(type, mode)) {
        await t.step(`${mode} K=${K} N=${N} rows=${rows} eps=${eps}`, async () => {
          const seed = testSeed();
          const next = rng(seed);
          const what = `${type} ${mode} K=${K} N=${N} rows=${rows} seed=${seed}`;
          const weightRows = (mode === "glu" ? 2 : 1) * N;
          const ggml = quantize(type, Float32Array.from(randomArray(next, weightRows * K, 0.5)));
          const w = dequantize(type, ggml, weightRows * K);
          const packed = packQuantPart(type, ggml, weightRows, K);
          const texture = createWeightTexture(gpu, packed.byteLength);
          writeTextureBytes(gpu, texture, 0, packed);
          const storage = uploadStorage(gpu, packed);
          const gain = gainOf(gpu, randomArray(next, K, 1.5));
          const norm = { gain: gain.buffer, eps };
          const x = Float32Array.from(randomArray(next, rows * K, 3));
          // x bound as a uniform (its buffer allows it) or as storage (its buffer does not).
          const xUniform = createMatmulX(gpu, x.byteLength, "x");
          const xStorage = uploadStorage(gpu, x);
          writeBytes(gpu, xUniform, 0, x);
          const y0 = Float32Array.from(randomArray(next, (rows + SPARE) * N, 4));
          const fresh = () =>
            mode === "add" ? uploadStorage(gpu, y0) : poisonedF32(gpu, (rows + SPARE) * N);
          const { want, tol } = reference(x, gain.exact, w, { rows, K, N, eps, mode }, y0);
          // The 16-row tile with x in storage is the slowest pipeline to compile (a minute on a
          // cold cache): TALL_TYPES check it from storage weights only, the pipeline
          // quant_kernels_test.ts compiles; every tile reads a texture elsewhere in the plan.
          const configs = [
            { name: "storage W, uniform x", w: storage, x: xUniform },
            rows > 16
              ? { name: "storage W, storage x", w: storage, x: xStorage }
              : { name: "texture W, storage x", w: texture, x: xStorage },
          ];

          const outputs: Float32Array[] = [];
          for (const c of configs) {
            const y = fresh();
            const kernel = bindQuantMatmul(gpu, { x: c.x, w: c.w, y, K, N, mode, type, norm });
            run(gpu, kernel, rows);
            const got = await readF32(gpu, y, (rows + SPARE) * N);
            for (let i = 0; i < got.length; i++) {
              const err = Math.abs(got[i] - (want[i] ?? NaN));
              // NaN fails: !(NaN <= tol); a spare row must keep its poison (or y0).
              if (i >= want.length) {
                const kept = mode === "add" ? got[i] === y0[i] : Number.isNaN(got[i]);
                if (!kept) throw new Error(`${what} ${c.name}: spare [${i}] written`);
              } else if (!(err <= tol[i])) {
                throw new Error(
                  `${what} ${c.name}: [${i}] got ${got[i]}, want ${want[i]} (tol ${tol[i]})`,
                );
              }
            }
            outputs.push(got);
            if (rows > 16) {
              // Row 0 alone (the 1-row tile) gives the bits it has in the batch.
              const alone = fresh();
              run(
                gpu,
                bindQuantMatmul(gpu, { x: c.x, w: c.w, y: alone, K, N, mode, type, norm }),
                1,
              );
              assertEquals(
                new Uint32Array((await readF32(gpu, alone, N)).buffer),
                new Uint32Array(got.buffer, 0, N),
                `${what} ${c.name}: row 0 alone differs from row 0 in the batch`,
              );
              alone.destroy();
            }
            y.destroy();
          }
          assertEquals(
            new Uint32Array(outputs[1].buffer),
            new Uint32Array(outputs[0].buffer),
            `${what}: the two bindings differ`,
          );
          for (const b of [texture, storage, gain.buffer, xUniform, xStorage]) b.destroy();
        });
      }
    }
  });
}
