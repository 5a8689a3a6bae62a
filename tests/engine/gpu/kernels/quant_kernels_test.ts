// The quantized matmul and embedding kernels against float64 references computed from the
// DEQUANTIZED weights (engine/quant's CPU decoders), on fresh random data (rerun a failure
// with SLUICE_TEST_SEED=<seed>).
//
// Error bound, per output: |got - want| <= QUANT_BOUND * Σ_k |x_k| (|w_k| + 2 M_k), where M_k is the
// largest |w| in k's 16-value half-chunk. The kernel sums a·Σx·q + b·Σx per half-chunk (b, the
// block's offset, is at most about M_k: Q4_1's and Q5_1's min is the 32-value block's, which random
// data keeps near the half's; IQ4_NL and IQ4_XS have none, their q being the table's levels), so
// f32 rounding scales with those magnitudes rather than with |y|, which cancellation can make small.
// Worst case about (16 + K/16 + 2)·2^-24 relative: 7e-6 at K = 1536; the bound is 2^-16 = 1.5e-5,
// the same for every format. A wrong nibble, high bit, level, scale or offset is off by O(1).

import type { Gpu } from "../../../../engine/gpu/device.ts";
import type { BoundKernel } from "../../../../engine/gpu/kernel.ts";
import {
  createStorage,
  readBack,
  readF32,
  uploadStorage,
  writeBytes,
} from "../../../../engine/gpu/buffers.ts";
import type { MatmulMode } from "../../../../engine/gpu/kernels/matmul.ts";
import {
  bindQuantMatmul,
  createMatmulX,
  uniformXBytes,
} from "../../../../engine/gpu/kernels/matmul_quant.ts";
import { bindQuantEmbedding } from "../../../../engine/gpu/kernels/embedding_quant.ts";
import { TOKEN_FROM_SAMPLER } from "../../../../engine/gpu/kernels/embedding.ts";
import {
  packQuantPart,
  quantLayout,
  quantRowsPerPart,
  writeQuantRows,
} from "../../../../engine/gpu/kernels/quant_layout.ts";
import {
  dequantize,
  QUANT_FORMATS,
  QUANT_TYPES,
  quantize,
  type QuantType,
} from "../../../../engine/quant/formats.ts";
import { poisonedF32, testGpu } from "../../../helpers/gpu.ts";
import { randomArray, rng, testSeed } from "../../../helpers/random.ts";
import { assert, assertEquals, assertThrows } from "../../../helpers/testing.ts";
import { everyOther, TALL_TYPES } from "../../../helpers/quant_plan.ts";

const QUANT_BOUND = 2 ** -16;
const SPARE = 2;

// ---- helpers --------------------------------------------------------------------------------------

interface QuantWeights {
  buffer: GPUBuffer;
  /** The dequantized values the buffer holds, [rows, K]. */
  values: Float32Array;
  /** Per value: the largest |w| of its 16-value half-chunk. */
  halfMax: Float32Array;
}

/** Random weights quantized to `type`, uploaded in the kernels' layout. */
function uploadQuant(gpu: Gpu, type: QuantType, rows: number, K: number, next: () => number) {
  const ggml = quantize(type, Float32Array.from(randomArray(next, rows * K, 0.5)));
  const values = dequantize(type, ggml, rows * K);
  const halfMax = new Float32Array(values.length);
  for (let i = 0; i < values.length; i += 16) {
    let m = 0;
    for (let j = 0; j < 16; j++) m = Math.max(m, Math.abs(values[i + j]));
    halfMax.fill(m, i, i + 16);
  }
  const buffer = uploadStorage(gpu, packQuantPart(type, ggml, rows, K));
  return { buffer, values, halfMax, ggml } as QuantWeights & { ggml: Uint8Array };
}

/**
 * x for a matmul. Uniform-capable (as the engine's activations are), the kernel reads it through a
 * uniform binding where the rows fit one; plain storage, through a storage binding.
 */
function uploadX(gpu: Gpu, x: Float32Array, uniform: boolean): GPUBuffer {
  const buffer = uniform
    ? createMatmulX(gpu, x.byteLength, "x")
    : createStorage(gpu, x.byteLength, "x");
  writeBytes(gpu, buffer, 0, x);
  return buffer;
}

function run(gpu: Gpu, ...steps: [BoundKernel, number][]): void {
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  for (const [kernel, rows] of steps) kernel.encode(pass, rows);
  pass.end();
  gpu.device.queue.submit([encoder.finish()]);
}

const silu = (v: number) => v / (1 + Math.exp(-v));

/** float64 dot of x row m with weight row n, and its error scale Σ |x| (|w| + 2M). */
function dotRef(x: Float32Array, w: QuantWeights, m: number, n: number, K: number) {
  let sum = 0, scale = 0;
  for (let k = 0; k < K; k++) {
    const xv = x[m * K + k], i = n * K + k;
    sum += xv * w.values[i];
    scale += Math.abs(xv) * (Math.abs(w.values[i]) + 2 * w.halfMax[i]);
  }
  return { sum, tol: QUANT_BOUND * scale };
}

/** Reference outputs and per-output tolerances for the three modes (y0: add's residual). */
function matmulRef(
  x: Float32Array,
  w: QuantWeights,
  rows: number,
  K: number,
  N: number,
  mode: MatmulMode,
  y0?: Float32Array,
) {
  const want = new Float64Array(rows * N), tol = new Float64Array(rows * N);
  for (let m = 0; m < rows; m++) {
    for (let n = 0; n < N; n++) {
      const g = dotRef(x, w, m, n, K);
      const i = m * N + n;
      if (mode === "glu") {
        const u = dotRef(x, w, m, n + N, K);
        want[i] = silu(g.sum) * u.sum;
        // silu' <= 1.1 everywhere; plus f32 rounding of silu and the product.
        tol[i] = 1.1 * g.tol * (Math.abs(u.sum) + u.tol) +
          (Math.abs(silu(g.sum)) + 1.1 * g.tol) * u.tol + 1e-6 * Math.abs(want[i]);
      } else {
        want[i] = g.sum + (mode === "add" ? y0![i] : 0);
        tol[i] = g.tol + 2 ** -23 * Math.abs(want[i]);
      }
    }
  }
  return { want, tol };
}

function assertWithin(got: Float32Array, want: Float64Array, tol: Float64Array, what: string) {
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i] - want[i]);
    // NaN fails: !(NaN <= tol).
    if (!(err <= tol[i])) {
      throw new Error(`${what}: [${i}] got ${got[i]}, want ${want[i]} (err ${err}, tol ${tol[i]})`);
    }
  }
}

// ---- matmul ---------------------------------------------------------------------------------------

type XKind = "uniform" | "storage";

/**
 * [K, N, rows, x binding]: K whole blocks, odd and even N, rows reaching the 1-, 4- and 16-row
 * tiles (19: one full 16-row tile and a partial one). Sampled as tests/helpers/quant_plan.ts says:
 * every format runs its three tiles and both x bindings in store, add on the same pipelines, glu at
 * the 1- and 16-row tiles (and the 4-row one with x in storage for every other format); the 16-row
 * tile with x in storage runs for TALL_TYPES only.
 */
function shapes(
  type: QuantType,
  mode: MatmulMode,
): [number, number, number, XKind][] {
  const B = QUANT_FORMATS[type].blockElems;
  const one = [B, 7, 1] as const;
  const four = [3 * B, 37, 3] as const;
  const full = B === 32 ? [576, 24, 16] as const : [512, 24, 16] as const;
  const tall = [2 * B, 9, 19] as const;
  const tallX: XKind[] = TALL_TYPES.includes(type) ? ["uniform", "storage"] : ["uniform"];
  if (mode === "glu") {
    return [
      [...one, "uniform"],
      [...full, "uniform"],
      ...(everyOther(type) ? [] : [[...four, "storage"] as [number, number, number, XKind]]),
    ];
  }
  const both: [number, number, number, XKind][] = [
    [...one, "uniform"],
    [...four, "storage"],
    [...full, "uniform"],
  ];
  return mode === "store" ? [...both, ...tallX.map((x) => [...tall, x] as typeof both[0])] : both;
}

for (const type of QUANT_TYPES) {
  Deno.test(`matmul_quant ${type}: store, add and glu match float64 of the dequantized weights`, async (t) => {
    const gpu = await testGpu();
    for (const mode of ["store", "add", "glu"] as const) {
      for (const [K, N, rows, xKind] of shapes(type, mode)) {
        await t.step(`${mode} K=${K} N=${N} rows=${rows} x ${xKind}`, async () => {
          const seed = testSeed();
          const next = rng(seed);
          const x = Float32Array.from(randomArray(next, rows * K));
          const w = uploadQuant(gpu, type, (mode === "glu" ? 2 : 1) * N, K, next);
          const y0 = Float32Array.from(randomArray(next, (rows + SPARE) * N, 4));
          const y = mode === "add" ? uploadStorage(gpu, y0) : poisonedF32(gpu, (rows + SPARE) * N);
          const before = new Uint32Array(await readBack(gpu, y));
          const xb = uploadX(gpu, x, xKind === "uniform");
          run(gpu, [bindQuantMatmul(gpu, { x: xb, w: w.buffer, y, K, N, mode, type }), rows]);
          const got = await readF32(gpu, y, (rows + SPARE) * N);
          const { want, tol } = matmulRef(x, w, rows, K, N, mode, y0);
          const what = `${type} ${mode} K=${K} N=${N} rows=${rows} x ${xKind} seed=${seed}`;
          assertWithin(got.subarray(0, rows * N), want, tol, what);
          const spare = new Uint32Array(got.buffer, rows * N * 4);
          assertEquals(
            spare,
            before.subarray(rows * N, (rows + SPARE) * N),
            `${what}: spare rows`,
          );
          for (const b of [xb, y, w.buffer]) b.destroy();
        });
      }
    }
  });
}

Deno.test("matmul_quant: row parts write their columns of a wider y, a row is the same in any batch and x binding", async () => {
  const gpu = await testGpu();
  for (const type of QUANT_TYPES) {
    const seed = testSeed();
    const next = rng(seed);
    // 5 rows take the 16-row tile, 3 the 4-row one (x in storage either way): the 16-row tile with
    // x in storage is TALL_TYPES' only (tests/helpers/quant_plan.ts).
    const K = QUANT_FORMATS[type].blockElems * 2, parts = [13, 6];
    const rows = TALL_TYPES.includes(type) ? 5 : 3;
    const ldy = 2 + parts[0] + parts[1];
    const x = Float32Array.from(randomArray(next, rows * K));
    const xb = uploadStorage(gpu, x);
    const y = poisonedF32(gpu, rows * ldy);
    const ws = parts.map((N) => uploadQuant(gpu, type, N, K, next));
    run(
      gpu,
      ...ws.map((w, i): [BoundKernel, number] => [
        bindQuantMatmul(gpu, {
          x: xb,
          w: w.buffer,
          y,
          K,
          N: parts[i],
          ldy,
          yCol: 1 + i * parts[0],
          mode: "store",
          type,
        }),
        rows,
      ]),
    );
    const got = await readF32(gpu, y, rows * ldy);
    const what = `${type} seed=${seed}`;
    for (let m = 0; m < rows; m++) {
      assert(Number.isNaN(got[m * ldy]) && Number.isNaN(got[m * ldy + ldy - 1]), `${what}: edges`);
      ws.forEach((w, i) => {
        const N = parts[i];
        const { want, tol } = matmulRef(x.subarray(m * K, (m + 1) * K), w, 1, K, N, "store");
        const start = m * ldy + 1 + i * parts[0];
        assertWithin(got.subarray(start, start + N), want, tol, `${what} part ${i} row ${m}`);
      });
    }
    // Row 2 alone (1-row tile, x through a uniform binding) against the batch (4- or 16-row tile,
    // x through a storage binding): the same bits. A uniform binding reads uniformXBytes from its
    // offset, so the buffer holds that much past row 2.
    const xu = createMatmulX(gpu, 2 * K * 4 + uniformXBytes(gpu), "x");
    writeBytes(gpu, xu, 0, x);
    const alone = poisonedF32(gpu, parts[0]);
    run(gpu, [
      bindQuantMatmul(gpu, {
        x: { buffer: xu, offset: 2 * K * 4 },
        w: ws[0].buffer,
        y: alone,
        K,
        N: parts[0],
        mode: "store",
        type,
      }),
      1,
    ]);
    const one = new Uint32Array(await readBack(gpu, alone));
    const batch = new Uint32Array(got.buffer, (2 * ldy + 1) * 4, parts[0]);
    assertEquals(one.subarray(0, parts[0]), batch, `${what}: batch invariance`);
    for (const b of [xb, xu, y, alone, ...ws.map((w) => w.buffer)]) b.destroy();
  }
});

Deno.test("quant_layout: rows written in chunks equal the whole part packed at once", async () => {
  const gpu = await testGpu();
  for (const type of QUANT_TYPES) {
    const next = rng(testSeed());
    const K = QUANT_FORMATS[type].blockElems * 3, rows = 7; // odd blocks: padded d words
    const ggml = quantize(type, Float32Array.from(randomArray(next, rows * K)));
    const whole = packQuantPart(type, ggml, rows, K);
    const layout = quantLayout(type, rows, K);
    assertEquals(whole.byteLength, layout.bytes);
    const buffer = createStorage(gpu, layout.bytes);
    const rowBytes = ggml.byteLength / rows;
    for (const [start, n] of [[0, 3], [3, 1], [4, 3]]) {
      writeQuantRows(
        gpu,
        buffer,
        layout,
        start,
        ggml.subarray(start * rowBytes, (start + n) * rowBytes),
        n,
      );
    }
    const got = new Uint8Array(await readBack(gpu, buffer, layout.bytes));
    assertEquals(got, whole, type);
    buffer.destroy();
  }
});

Deno.test("matmul_quant: rejects shapes it cannot run; parts fit the binding limit", async () => {
  const gpu = await testGpu();
  const b = createStorage(gpu, 64);
  assertThrows(
    () => bindQuantMatmul(gpu, { x: b, w: b, y: b, K: 48, N: 4, mode: "store", type: "q8_0" }),
    RangeError,
  );
  assertThrows(
    () => bindQuantMatmul(gpu, { x: b, w: b, y: b, K: 576, N: 4, mode: "store", type: "q4_k" }),
    RangeError,
  );
  const small = { ...gpu, maxBinding: 1 << 20 };
  const perPart = quantRowsPerPart(small, "q4_0", 4096);
  assertEquals(perPart % 192, 0);
  assert(quantLayout("q4_0", perPart, 4096).bytes <= 1 << 20);
  b.destroy();
});

// ---- embedding ------------------------------------------------------------------------------------

Deno.test("embedding_quant: rows from two table parts equal the CPU dequantization bit for bit", async () => {
  const gpu = await testGpu();
  for (const type of QUANT_TYPES) {
    const seed = testSeed();
    const next = rng(seed);
    // Odd block counts: the D region's rows end in a padded word.
    const D = QUANT_FORMATS[type].blockElems * (QUANT_FORMATS[type].blockElems === 32 ? 5 : 3);
    const vocab = 11, split = 7;
    const ggml = quantize(type, Float32Array.from(randomArray(next, vocab * D)));
    const table = dequantize(type, ggml, vocab * D);
    const rowBytes = ggml.byteLength / vocab;
    // Token ids per row; row 3 takes the sampler's id for slot 1 (= 9).
    const ids = [0, 10, 6, TOKEN_FROM_SAMPLER, 7, 6];
    const rows = ids.length;
    const tokens = uploadStorage(gpu, Uint32Array.from(ids));
    const rowSlot = uploadStorage(gpu, Uint32Array.from([0, 0, 0, 1, 0, 0]));
    const nextIds = uploadStorage(gpu, Uint32Array.from([2, 9]));
    const y = poisonedF32(gpu, (rows + 1) * D);
    const parts = [[0, split], [split, vocab - split]].map(([rowStart, rowCount]) => ({
      rowStart,
      rowCount,
      buffer: uploadStorage(
        gpu,
        packQuantPart(
          type,
          ggml.subarray(rowStart * rowBytes, (rowStart + rowCount) * rowBytes),
          rowCount,
          D,
        ),
      ),
    }));
    run(
      gpu,
      ...parts.map((part): [BoundKernel, number] => [
        bindQuantEmbedding(gpu, {
          table: part.buffer,
          rowStart: part.rowStart,
          rowCount: part.rowCount,
          tokens,
          rowSlot,
          nextIds,
          y,
          D,
          type,
        }),
        rows,
      ]),
    );
    const got = await readF32(gpu, y, (rows + 1) * D);
    ids.forEach((id, m) => {
      const token = id === TOKEN_FROM_SAMPLER ? 9 : id;
      assertEquals(
        got.subarray(m * D, (m + 1) * D),
        table.subarray(token * D, (token + 1) * D),
        `${type} row ${m} (token ${token}) seed=${seed}`,
      );
    });
    assert(got.subarray(rows * D).every(Number.isNaN), `${type}: the spare row was written`);
    for (const b of [tokens, rowSlot, nextIds, y, ...parts.map((p) => p.buffer)]) b.destroy();
  }
});
