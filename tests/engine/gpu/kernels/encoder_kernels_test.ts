// The encoder's own kernels (LayerNorm, bias + activation, input embedding, in-place rotary,
// bidirectional packed attention, pooling) against float64, on both dtype paths, several shapes
// with odd sizes, fresh random data (rerun a failure with SLUICE_TEST_SEED=<seed>).
//
// Bounds (relative to each output's largest magnitude): the reference reads weights as stored
// (f16-rounded on the f16 path), so only f32 arithmetic differs. LayerNorm, embedding, pooling and
// rotary: sums of at most a few hundred f32 terms, 2e-6 (seen ~3e-7). Bias + GELU: erf's
// approximation (1.5e-7 absolute) plus f32 rounding, 2e-6. Attention: f32 exp and online-softmax
// rescaling over up to 600 keys, 1e-5 (seen ~1e-6).

import type { Gpu } from "../../../../engine/gpu/device.ts";
import { readF32, uploadStorage } from "../../../../engine/gpu/buffers.ts";
import type { BoundKernel } from "../../../../engine/gpu/kernel.ts";
import { bindLayerNorm } from "../../../../engine/gpu/kernels/layer_norm.ts";
import { type Activation, bindBiasAct } from "../../../../engine/gpu/kernels/bias_act.ts";
import { bindEncoderEmbed } from "../../../../engine/gpu/kernels/encoder_embed.ts";
import { bindRotaryInplace, rotaryTable } from "../../../../engine/gpu/kernels/rotary_inplace.ts";
import { bindEncoderAttention } from "../../../../engine/gpu/kernels/encoder_attention.ts";
import { bindPool, type PoolMode } from "../../../../engine/gpu/kernels/pool.ts";
import { uploadWeightValues } from "../../../../engine/encoder/upload.ts";
import { assertClose } from "../../../helpers/compare.ts";
import { erf } from "../../../helpers/reference_bert.ts";
import { testGpus } from "../../../helpers/gpu.ts";
import { randomArray, rng, testSeed } from "../../../helpers/random.ts";

async function run(gpu: Gpu, kernel: BoundKernel, rows: number): Promise<void> {
  const encoder = gpu.device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  kernel.encode(pass, rows);
  pass.end();
  gpu.device.queue.submit([encoder.finish()]);
  await gpu.device.queue.onSubmittedWorkDone();
}

/** Weights stored as W, and the exact values the GPU reads back from them. */
function weights(gpu: Gpu, values: Float64Array) {
  const { buffer, stored } = uploadWeightValues(gpu, values);
  return { buffer, values: stored };
}

/** Input spans of the given lengths, packed one after another. */
function spansOf(lengths: number[]): [number, number][] {
  let at = 0;
  return lengths.map((n) => [at, at += n]);
}

Deno.test("layer norm: matches float64", async (t) => {
  for (const { label, gpu } of await testGpus()) {
    for (const [D, rows] of [[1, 1], [7, 3], [64, 2], [384, 5], [333, 17]]) {
      await t.step(`${label} D=${D} rows=${rows}`, async () => {
        const seed = testSeed();
        const next = rng(seed);
        // An offset mean, as residual streams have, so a one-pass variance would show.
        const x = Float32Array.from(randomArray(next, rows * D, 3), (v) => v + 5);
        const gain = weights(gpu, randomArray(next, D, 1));
        const bias = weights(gpu, randomArray(next, D, 0.5));
        const xb = uploadStorage(gpu, x);
        const eps = 1e-12;
        await run(
          gpu,
          bindLayerNorm(gpu, { x: xb, gain: gain.buffer, bias: bias.buffer, D, eps }),
          rows,
        );
        const want = new Float64Array(rows * D);
        for (let m = 0; m < rows; m++) {
          const row = x.subarray(m * D, (m + 1) * D);
          const mean = row.reduce((a, b) => a + b, 0) / D;
          const variance = row.reduce((a, b) => a + (b - mean) ** 2, 0) / D;
          for (let i = 0; i < D; i++) {
            want[m * D + i] = (row[i] - mean) / Math.sqrt(variance + eps) * gain.values[i] +
              bias.values[i];
          }
        }
        // D=1: every row normalises to 0 (variance 0), and the result is the bias exactly.
        assertClose(await readF32(gpu, xb, rows * D), want, 2e-6, `${label} seed ${seed}`);
      });
    }
  }
});

/** The soft cap the tests apply: values up to ±6 here, so most of them bend. */
const CAP = 2.5;

function activation(act: Activation, v: number): number {
  if (act === "tanh") return Math.tanh(v);
  if (act === "softcap") return CAP * Math.tanh(v / CAP);
  if (act === "gelu_tanh") {
    return 0.5 * v * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (v + 0.044715 * v ** 3)));
  }
  return 0.5 * v * (1 + erf(v / Math.SQRT2));
}

Deno.test("bias + activation: matches float64 for GELU (erf and tanh), tanh and the soft cap", async (t) => {
  for (const { label, gpu } of await testGpus()) {
    for (const act of ["gelu", "gelu_tanh", "tanh", "softcap"] as Activation[]) {
      for (
        const [width, rows, withBias] of [[5, 3, true], [200, 7, true], [67, 2, false]] as const
      ) {
        await t.step(`${label} ${act} width=${width} rows=${rows} bias=${withBias}`, async () => {
          const seed = testSeed();
          const next = rng(seed);
          const x = Float32Array.from(randomArray(next, rows * width, 6));
          const b = withBias ? weights(gpu, randomArray(next, width, 1)) : null;
          const xb = uploadStorage(gpu, x);
          const cap = act === "softcap" ? CAP : undefined;
          await run(gpu, bindBiasAct(gpu, { x: xb, b: b?.buffer ?? null, width, act, cap }), rows);
          const want = Float64Array.from(
            x,
            (v, i) => activation(act, v + (b ? b.values[i % width] : 0)),
          );
          assertClose(await readF32(gpu, xb, rows * width), want, 2e-6, `${label} seed ${seed}`);
        });
      }
    }
  }
});

Deno.test("encoder embedding: word + position + token type, each optional", async (t) => {
  for (const { label, gpu } of await testGpus()) {
    for (
      const [D, withPos, withType] of [[7, true, true], [64, false, true], [
        96,
        true,
        false,
      ]] as const
    ) {
      await t.step(`${label} D=${D} pos=${withPos} type=${withType}`, async () => {
        const seed = testSeed();
        const next = rng(seed);
        const vocab = 11, positions = 9, types = 2, rows = 13;
        const word = weights(gpu, randomArray(next, vocab * D));
        const pos = weights(gpu, randomArray(next, positions * D));
        const type = weights(gpu, randomArray(next, types * D));
        const rows3 = new Uint32Array(rows * 3);
        for (let m = 0; m < rows; m++) {
          rows3.set([Math.floor(next() * vocab), Math.floor(next() * positions), m % types], 3 * m);
        }
        const x = uploadStorage(gpu, new Float32Array(rows * D).fill(NaN));
        await run(
          gpu,
          bindEncoderEmbed(gpu, {
            rows3: uploadStorage(gpu, rows3),
            word: word.buffer,
            position: withPos ? pos.buffer : null,
            tokenType: withType ? type.buffer : null,
            x,
            D,
          }),
          rows,
        );
        const want = new Float64Array(rows * D);
        for (let m = 0; m < rows; m++) {
          const [id, p, tt] = rows3.subarray(3 * m, 3 * m + 3);
          for (let i = 0; i < D; i++) {
            want[m * D + i] = word.values[id * D + i] + (withPos ? pos.values[p * D + i] : 0) +
              (withType ? type.values[tt * D + i] : 0);
          }
        }
        assertClose(await readF32(gpu, x, rows * D), want, 2e-6, `${label} seed ${seed}`);
      });
    }
  }
});

Deno.test("rotary in place: q and k heads rotated, v untouched, partial rotary dims", async (t) => {
  const { gpu } = (await testGpus())[0];
  for (const [heads, headDim, rotDim, rows] of [[2, 8, 8, 5], [3, 12, 6, 7], [1, 64, 64, 3]]) {
    await t.step(`heads=${heads} headDim=${headDim} rotDim=${rotDim}`, async () => {
      const seed = testSeed();
      const next = rng(seed);
      const width = 3 * heads * headDim;
      const x = Float32Array.from(randomArray(next, rows * width));
      const positions = Uint32Array.from({ length: rows }, () => Math.floor(next() * 40));
      const base = 1000;
      const xb = uploadStorage(gpu, x);
      await run(
        gpu,
        bindRotaryInplace(gpu, {
          qkv: xb,
          positions: uploadStorage(gpu, positions),
          cosSin: uploadStorage(gpu, rotaryTable(40, rotDim, base)),
          heads,
          headDim,
          rotDim,
        }),
        rows,
      );
      const want = Float64Array.from(x);
      const half = rotDim / 2;
      for (let m = 0; m < rows; m++) {
        for (let h = 0; h < 2 * heads; h++) {
          const at = m * width + h * headDim;
          for (let i = 0; i < half; i++) {
            const theta = positions[m] * Math.pow(base, -2 * i / rotDim);
            const a = x[at + i], b = x[at + i + half];
            want[at + i] = a * Math.cos(theta) - b * Math.sin(theta);
            want[at + i + half] = b * Math.cos(theta) + a * Math.sin(theta);
          }
        }
      }
      assertClose(await readF32(gpu, xb, rows * width), want, 2e-6, `seed ${seed}`);
    });
  }
});

/** Float64 attention of packed inputs: each row over its own input's rows. */
export function packedAttention(
  qkv: ArrayLike<number>,
  spans: [number, number][],
  heads: number,
  headDim: number,
): Float64Array {
  const H = heads * headDim;
  const width = 3 * H;
  const rows = spans[spans.length - 1][1];
  const out = new Float64Array(rows * H);
  for (const [start, end] of spans) {
    for (let m = start; m < end; m++) {
      for (let h = 0; h < heads; h++) {
        const s = new Float64Array(end - start);
        for (let j = start; j < end; j++) {
          let dot = 0;
          for (let d = 0; d < headDim; d++) {
            dot += qkv[m * width + h * headDim + d] * qkv[j * width + H + h * headDim + d];
          }
          s[j - start] = dot / Math.sqrt(headDim);
        }
        const max = Math.max(...s);
        const e = s.map((v) => Math.exp(v - max));
        const sum = e.reduce((a, b) => a + b, 0);
        for (let d = 0; d < headDim; d++) {
          let acc = 0;
          for (let j = start; j < end; j++) {
            acc += e[j - start] * qkv[j * width + 2 * H + h * headDim + d];
          }
          out[m * H + h * headDim + d] = acc / sum;
        }
      }
    }
  }
  return out;
}

Deno.test("encoder attention: packed inputs see only themselves, chunks past 256 keys", async (t) => {
  const { gpu } = (await testGpus())[0];
  const cases: [number, number, number[]][] = [
    [1, 8, [1]],
    [2, 8, [3, 1, 5]],
    [3, 12, [7, 2]],
    [2, 64, [300, 4]],
    [1, 80, [513]],
  ];
  for (const [heads, headDim, lengths] of cases) {
    await t.step(`heads=${heads} headDim=${headDim} lengths=${lengths}`, async () => {
      const seed = testSeed();
      const next = rng(seed);
      const spans = spansOf(lengths);
      const rows = spans[spans.length - 1][1];
      const qkv = Float32Array.from(randomArray(next, rows * 3 * heads * headDim, 2));
      const rowSpans = new Uint32Array(rows * 2);
      for (const [s, e] of spans) for (let m = s; m < e; m++) rowSpans.set([s, e], 2 * m);
      const out = uploadStorage(gpu, new Float32Array(rows * heads * headDim).fill(NaN));
      await run(
        gpu,
        bindEncoderAttention(gpu, {
          qkv: uploadStorage(gpu, qkv),
          spans: uploadStorage(gpu, rowSpans),
          out,
          heads,
          headDim,
        }),
        rows,
      );
      const want = packedAttention(qkv, spans, heads, headDim);
      assertClose(await readF32(gpu, out, rows * heads * headDim), want, 1e-5, `seed ${seed}`);
    });
  }
});

Deno.test("pool: first, mean and last rows of each input", async (t) => {
  const { gpu } = (await testGpus())[0];
  for (const mode of ["first", "mean", "last"] as PoolMode[]) {
    for (const [D, lengths] of [[5, [1, 4, 2]], [130, [9, 1]]] as [number, number[]][]) {
      await t.step(`${mode} D=${D} lengths=${lengths}`, async () => {
        const seed = testSeed();
        const next = rng(seed);
        const spans = spansOf(lengths);
        const rows = spans[spans.length - 1][1];
        const x = Float32Array.from(randomArray(next, rows * D));
        const y = uploadStorage(gpu, new Float32Array(spans.length * D).fill(NaN));
        await run(
          gpu,
          bindPool(gpu, {
            x: uploadStorage(gpu, x),
            spans: uploadStorage(gpu, Uint32Array.from(spans.flat())),
            y,
            D,
            mode,
          }),
          spans.length,
        );
        const want = new Float64Array(spans.length * D);
        spans.forEach(([s, e], k) => {
          for (let i = 0; i < D; i++) {
            if (mode === "first") want[k * D + i] = x[s * D + i];
            else if (mode === "last") want[k * D + i] = x[(e - 1) * D + i];
            else {
              let sum = 0;
              for (let m = s; m < e; m++) sum += x[m * D + i];
              want[k * D + i] = sum / (e - s);
            }
          }
        });
        assertClose(await readF32(gpu, y, spans.length * D), want, 2e-6, `seed ${seed}`);
      });
    }
  }
});
