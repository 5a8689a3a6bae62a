// The dense kernels (matmul, embedding, gather, copy) against float64 references, on
// both dtype paths, with fresh random data (rerun a failure with SLUICE_TEST_SEED=<seed>).
//
// Error bounds are relative to the largest |reference| value (see helpers/compare.ts). The f16
// path's reference is computed from the f16-ROUNDED weights, so storage rounding is not error: both
// paths then differ from float64 only by f32 arithmetic, and share one tight bound.

import type { Gpu } from "../../../../engine/gpu/device.ts";
import type { BoundKernel } from "../../../../engine/gpu/kernel.ts";
import { createStorage, readBack, readF32, uploadStorage } from "../../../../engine/gpu/buffers.ts";
import { f16BitsToF32, toF16Array } from "../../../../engine/quant/half.ts";
import { bindMatmul, type MatmulMode } from "../../../../engine/gpu/kernels/matmul.ts";
import { bindEmbedding, TOKEN_FROM_SAMPLER } from "../../../../engine/gpu/kernels/embedding.ts";
import { bindGatherRows } from "../../../../engine/gpu/kernels/gather.ts";
import { bindCopy } from "../../../../engine/gpu/kernels/copy.ts";
import { assertClose, POISON_F32 } from "../../../helpers/compare.ts";
import { poisonedF32, testGpus } from "../../../helpers/gpu.ts";
import { randomArray, rng, testSeed } from "../../../helpers/random.ts";
import { assert, assertEquals, assertThrows } from "../../../helpers/testing.ts";

/** f32 accumulation: observed up to 1e-6 at K=576 and 2e-6 at K=1536, on both paths. */
const MATMUL_BOUND = 1e-5;

// ---- helpers --------------------------------------------------------------------------------------

/** f32 activations: the GPU buffer and the exact values it holds. */
function uploadF32(
  gpu: Gpu,
  values: ArrayLike<number>,
): { buffer: GPUBuffer; values: Float32Array } {
  const f32 = Float32Array.from(values);
  return { buffer: uploadStorage(gpu, f32), values: f32 };
}

/** Weights stored as W (f16 or f32): the buffer and the exact (rounded) values it holds. */
function uploadW(gpu: Gpu, values: ArrayLike<number>): { buffer: GPUBuffer; values: Float64Array } {
  if (gpu.f16) {
    const bits = toF16Array(values);
    return { buffer: uploadStorage(gpu, bits), values: Float64Array.from(bits, f16BitsToF32) };
  }
  const f32 = Float32Array.from(values);
  return { buffer: uploadStorage(gpu, f32), values: Float64Array.from(f32) };
}

/** Encodes each [kernel, rows] in one pass and submits it. */
function run(gpu: Gpu, ...steps: [BoundKernel, number][]): void {
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  for (const [kernel, rows] of steps) kernel.encode(pass, rows);
  pass.end();
  gpu.device.queue.submit([encoder.finish()]);
}

async function readU32Bits(gpu: Gpu, buffer: GPUBuffer, count: number): Promise<Uint32Array> {
  return new Uint32Array(await readBack(gpu, buffer, count * 4));
}

function silu(v: number): number {
  return v / (1 + Math.exp(-v));
}

/**
 * float64 reference of one matmul output, and Σ|x·w|: how large its summed terms are, whatever
 * they cancel to.
 */
function dot(
  x: ArrayLike<number>,
  xOff: number,
  w: ArrayLike<number>,
  wOff: number,
  K: number,
): { sum: number; terms: number } {
  let sum = 0, terms = 0;
  for (let k = 0; k < K; k++) {
    const term = x[xOff + k] * w[wOff + k];
    sum += term;
    terms += Math.abs(term);
  }
  return { sum, terms };
}

/**
 * float64 reference: y[m, n] for mode (before any residual), and `termScale`, the largest output's
 * sensitivity to rounding divided by K: what one summed term weighs. It is the error's floor scale,
 * since a tensor of one output (K=3, N=1) can cancel to near zero while f32 rounding still scales
 * with its terms; for any tensor of many outputs max|y| is far above it.
 */
function matmulRef(
  x: ArrayLike<number>,
  w: ArrayLike<number>,
  rows: number,
  K: number,
  N: number,
  mode: MatmulMode,
): { y: Float64Array; termScale: number } {
  const y = new Float64Array(rows * N);
  let termScale = 0;
  for (let m = 0; m < rows; m++) {
    for (let n = 0; n < N; n++) {
      const { sum: a, terms: aTerms } = dot(x, m * K, w, n * K, K);
      if (mode !== "glu") {
        y[m * N + n] = a;
        termScale = Math.max(termScale, aTerms / K);
        continue;
      }
      const { sum: b, terms: bTerms } = dot(x, m * K, w, (N + n) * K, K);
      y[m * N + n] = silu(a) * b;
      // d(silu(a)·b) = silu'(a)·b·da + silu(a)·db, each rounding error scaling with its terms.
      const sig = 1 / (1 + Math.exp(-a));
      const siluSlope = sig * (1 + a * (1 - sig));
      const sensitivity = Math.abs(siluSlope * b) * aTerms + Math.abs(silu(a)) * bTerms;
      termScale = Math.max(termScale, sensitivity / K);
    }
  }
  return { y, termScale };
}

// ---- matmul ---------------------------------------------------------------------------------------

// [K, N, rows]. Vector path (K % 8 == 0, N % 4 == 0): rows 1, 3, 6 and 130 reach the 1-, 4-, 8- and
// 16-row tiles (130 = eight full 16-row tiles and a partial one); N=200 and 196 leave lanes whose
// quads are clamped. Scalar path: sizes that are not multiples of 4 or 8.
const VECTOR_SHAPES: [number, number, number][] = [
  [64, 40, 1],
  [576, 200, 3],
  [48, 196, 6],
  [96, 24, 130],
];
const SCALAR_SHAPES: [number, number, number][] = [[13, 7, 5], [100, 33, 17], [3, 1, 1]];
const SPARE = 2;

/**
 * llvmpipe JIT-compiles each tile at its first dispatch, and a 16-row tile takes it 3-6 s. The
 * tiles' code is the same on both paths except for how weights are decoded, so the 16-row tile
 * runs on f32 for "store" only (add and glu run it on f16), keeping a cold run of this file short.
 */
function matmulShapes(label: string, mode: MatmulMode): [number, number, number][] {
  const vector = label === "f32" && mode !== "store"
    ? VECTOR_SHAPES.filter(([, , rows]) => rows <= 8)
    : VECTOR_SHAPES;
  return [...vector, ...SCALAR_SHAPES];
}

for (const mode of ["store", "add", "glu"] as const) {
  Deno.test(`matmul ${mode}: matches float64 on both dtype paths`, async (t) => {
    for (const { label, gpu } of await testGpus()) {
      for (const [K, N, rows] of matmulShapes(label, mode)) {
        await t.step(`${label} K=${K} N=${N} rows=${rows}`, async () => {
          const seed = testSeed();
          const next = rng(seed);
          const x = uploadF32(gpu, randomArray(next, rows * K));
          const w = uploadW(gpu, randomArray(next, (mode === "glu" ? 2 : 1) * N * K, 0.5));
          const { y: want, termScale } = matmulRef(x.values, w.values, rows, K, N, mode);
          // y has SPARE rows past the batch: the tile's padding rows must not be written.
          let y: GPUBuffer;
          if (mode === "add") {
            const residual = uploadF32(gpu, randomArray(next, (rows + SPARE) * N, 4));
            for (let i = 0; i < want.length; i++) want[i] += residual.values[i];
            y = residual.buffer;
          } else {
            y = poisonedF32(gpu, (rows + SPARE) * N);
          }
          const before = await readU32Bits(gpu, y, (rows + SPARE) * N);
          run(gpu, [bindMatmul(gpu, { x: x.buffer, w: w.buffer, y, K, N, mode }), rows]);
          const got = await readF32(gpu, y, (rows + SPARE) * N);
          const what = `${label} ${mode} K=${K} N=${N} rows=${rows} seed=${seed}`;
          assertClose(got.subarray(0, rows * N), want, MATMUL_BOUND, what, termScale);
          const spare = new Uint32Array(got.buffer, rows * N * 4);
          assertEquals(spare, before.subarray(rows * N), `${what}: rows past the batch changed`);
        });
      }
    }
  });
}

Deno.test("matmul: yCol/ldy write row-parts into a wider y and touch no other column", async () => {
  for (const { label, gpu } of await testGpus()) {
    // Aligned (vector path) and unaligned (scalar path) column ranges; columns left of, between
    // and right of the parts must keep their values.
    const layouts = [
      { K: 64, ldy: 56, parts: [{ yCol: 4, N: 16 }, { yCol: 24, N: 24 }] },
      { K: 21, ldy: 53, parts: [{ yCol: 3, N: 17 }, { yCol: 20, N: 24 }] },
    ];
    for (const { K, ldy, parts } of layouts) {
      const seed = testSeed();
      const next = rng(seed);
      const rows = 5;
      const x = uploadF32(gpu, randomArray(next, rows * K));
      const before = new Float32Array(randomArray(next, rows * ldy, 9));
      const y = uploadStorage(gpu, before);
      const ws = parts.map((part) => uploadW(gpu, randomArray(next, part.N * K)));
      run(
        gpu,
        ...parts.map((part, i): [BoundKernel, number] => [
          bindMatmul(gpu, {
            x: x.buffer,
            w: ws[i].buffer,
            y,
            K,
            N: part.N,
            ldy,
            yCol: part.yCol,
            mode: "store",
          }),
          rows,
        ]),
      );
      const got = await readF32(gpu, y, rows * ldy);
      const owner = (col: number) => parts.findIndex((p) => col >= p.yCol && col < p.yCol + p.N);
      for (let m = 0; m < rows; m++) {
        for (let col = 0; col < ldy; col++) {
          const i = owner(col);
          if (i < 0) {
            assert(
              Object.is(got[m * ldy + col], before[m * ldy + col]),
              `${label} K=${K} column ${col} was touched`,
            );
          }
        }
      }
      parts.forEach((part, i) => {
        const { y: want, termScale } = matmulRef(x.values, ws[i].values, rows, K, part.N, "store");
        const slice = new Float32Array(rows * part.N);
        for (let m = 0; m < rows; m++) {
          slice.set(got.subarray(m * ldy + part.yCol, m * ldy + part.yCol + part.N), m * part.N);
        }
        assertClose(slice, want, MATMUL_BOUND, `${label} K=${K} part ${i} seed=${seed}`, termScale);
      });
    }
  }
});

Deno.test("matmul: a row's result is bitwise the same alone or in any batch", async (t) => {
  for (const { label, gpu } of await testGpus()) {
    // Vector path in every mode, scalar path (odd K); f32 runs "store" only (see matmulShapes).
    const cases: [number, MatmulMode][] = [[576, "store"], [576, "glu"], [64, "add"], [
      13,
      "store",
    ]];
    for (const [K, mode] of label === "f32" ? cases.filter(([, m]) => m === "store") : cases) {
      await t.step(`${label} K=${K} ${mode}`, async () => {
        const seed = testSeed();
        const next = rng(seed);
        const N = 200;
        const probe = randomArray(next, K);
        const w = uploadW(gpu, randomArray(next, (mode === "glu" ? 2 : 1) * N * K, 0.5));
        const residual = randomArray(next, N);
        // The probe row alone, then at some position inside batches of other random rows: every
        // tile (1, 4, 8, 16 rows), partial tiles and many tiles.
        const layouts: [number, number][] = [[1, 0], [3, 2], [7, 5], [16, 13], [17, 16], [
          300,
          257,
        ]];
        let reference: Uint32Array | undefined;
        for (const [rows, at] of layouts) {
          const xs = randomArray(next, rows * K);
          xs.set(probe, at * K);
          const ys = randomArray(next, rows * N);
          ys.set(residual, at * N);
          const x = uploadF32(gpu, xs);
          const y = mode === "add" ? uploadF32(gpu, ys).buffer : poisonedF32(gpu, rows * N);
          run(gpu, [bindMatmul(gpu, { x: x.buffer, w: w.buffer, y, K, N, mode }), rows]);
          const bits = new Uint32Array(await readBack(gpu, y, N * 4, at * N * 4));
          if (!reference) {
            reference = bits;
            assert(!bits.includes(POISON_F32), "probe row was not written");
          } else {
            const diff = bits.findIndex((b, i) => b !== reference![i]);
            assert(
              diff < 0,
              `${label} K=${K} ${mode} seed=${seed}: rows=${rows} output ${diff} differs from rows=1`,
            );
          }
        }
      });
    }
  }
});

Deno.test("matmul: rejects shapes it cannot run", async () => {
  const [{ gpu }] = await testGpus();
  const b = createStorage(gpu, 64);
  assertThrows(() => bindMatmul(gpu, { x: b, w: b, y: b, K: 0, N: 4, mode: "store" }), RangeError);
  assertThrows(
    () => bindMatmul(gpu, { x: b, w: b, y: b, K: 8, N: 4, ldy: 6, yCol: 3, mode: "store" }),
    RangeError,
  );
  assertThrows(
    () => bindMatmul(gpu, { x: b, w: b, y: b, K: 8, N: 4, mode: "max" as MatmulMode }),
    RangeError,
  );
});

// ---- embedding ------------------------------------------------------------------------------------

Deno.test("embedding: split table parts, prefill ids and decode rows reading nextIds", async (t) => {
  for (const { label, gpu } of await testGpus()) {
    for (const D of [576, 7]) {
      await t.step(`${label} D=${D}`, async () => {
        const seed = testSeed();
        const next = rng(seed);
        const vocab = 100;
        const table = uploadW(gpu, randomArray(next, vocab * D));
        const split = 37; // part 0 holds rows 0..36, part 1 rows 37..99
        const parts = [{ rowStart: 0, rowCount: split }, {
          rowStart: split,
          rowCount: vocab - split,
        }].map((part) => {
          const values = table.values.subarray(
            part.rowStart * D,
            (part.rowStart + part.rowCount) * D,
          );
          return { ...part, table: uploadW(gpu, values).buffer };
        });
        const nextIds = Uint32Array.from({ length: 6 }, () => Math.floor(next() * vocab));
        const rows = 9;
        const rowSlot = Uint32Array.from(
          { length: rows },
          () => Math.floor(next() * nextIds.length),
        );
        // Ids from both parts, the edges of the split, and decode rows.
        const tokens = Uint32Array.from([
          0,
          36,
          37,
          99,
          TOKEN_FROM_SAMPLER,
          5,
          TOKEN_FROM_SAMPLER,
          60,
          TOKEN_FROM_SAMPLER,
        ]);
        const ids = Array.from(
          tokens,
          (id, m) => id === TOKEN_FROM_SAMPLER ? nextIds[rowSlot[m]] : id,
        );
        const y = poisonedF32(gpu, rows * D);
        const bound = parts.map((part) =>
          bindEmbedding(gpu, {
            table: part.table,
            rowStart: part.rowStart,
            rowCount: part.rowCount,
            tokens: uploadStorage(gpu, tokens),
            rowSlot: uploadStorage(gpu, rowSlot),
            nextIds: uploadStorage(gpu, nextIds),
            y,
            D,
          })
        );
        // Part 0 alone writes exactly the rows whose id it holds.
        run(gpu, [bound[0], rows]);
        const half = await readU32Bits(gpu, y, rows * D);
        for (let m = 0; m < rows; m++) {
          const written = !half.subarray(m * D, (m + 1) * D).includes(POISON_F32);
          assertEquals(written, ids[m] < split, `${label} part 0, row ${m} (id ${ids[m]})`);
        }
        run(gpu, [bound[1], rows]);
        const got = await readF32(gpu, y, rows * D);
        for (let m = 0; m < rows; m++) {
          const want = Float32Array.from(table.values.subarray(ids[m] * D, (ids[m] + 1) * D));
          assertEquals(
            got.subarray(m * D, (m + 1) * D),
            want,
            `${label} row ${m} (id ${ids[m]}) seed=${seed}`,
          );
        }
      });
    }
  }
});

// ---- gather ---------------------------------------------------------------------------------------

Deno.test("gatherRows: picks the indexed rows exactly", async () => {
  for (const { label, gpu } of await testGpus()) {
    for (const [D, srcRows, rows] of [[576, 17, 3], [13, 5, 5], [64, 130, 1]]) {
      const seed = testSeed();
      const next = rng(seed);
      const x = uploadF32(gpu, randomArray(next, srcRows * D));
      const rowIndex = Uint32Array.from({ length: rows }, () => Math.floor(next() * srcRows));
      const y = poisonedF32(gpu, rows * D);
      run(gpu, [
        bindGatherRows(gpu, { x: x.buffer, rowIndex: uploadStorage(gpu, rowIndex), y, D }),
        rows,
      ]);
      const got = await readF32(gpu, y, rows * D);
      for (let s = 0; s < rows; s++) {
        const want = x.values.subarray(rowIndex[s] * D, (rowIndex[s] + 1) * D);
        assertEquals(
          got.subarray(s * D, (s + 1) * D),
          want,
          `${label} D=${D} row ${s} seed=${seed}`,
        );
      }
    }
  }
});

// ---- copy -----------------------------------------------------------------------------------------

Deno.test("copy: copies exactly `bytes` and nothing past them", async () => {
  const [{ gpu }] = await testGpus();
  for (const words of [1, 255, 256, 4097]) {
    const bytes = words * 16;
    const src = new Uint32Array(words * 4 + 8).map((_, i) => (i * 2654435761) >>> 0);
    const dst = poisonedF32(gpu, words * 4 + 8);
    run(gpu, [bindCopy(gpu, { src: uploadStorage(gpu, src), dst, bytes }), 1]);
    const got = await readU32Bits(gpu, dst, words * 4 + 8);
    assertEquals(got.subarray(0, words * 4), src.subarray(0, words * 4), `copy of ${bytes} bytes`);
    assert(
      got.subarray(words * 4).every((v) => v === POISON_F32),
      `copy of ${bytes} bytes wrote past the end`,
    );
  }
  const b = createStorage(gpu, 64);
  assertThrows(() => bindCopy(gpu, { src: b, dst: b, bytes: 20 }), RangeError);
});
