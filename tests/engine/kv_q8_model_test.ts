// --kv-dtype q8_0 on whole generated models, against f16 KV: greedy agreement and the logprob
// difference of f16's greedy token (bench/kv_dtype.ts's measurement, teacher-forced on f16's
// tokens), and the capacity one --gpu-kv-mb buys.
//
// Bounds, and why: q8_0 moves each K/V value by at most 1/254 of its group's largest |value| (rms
// about 1/440), against f16's relative 2^-11 per value, so q8_0 should sit some 30x further from
// f16 KV than f32 KV does, and still well inside what changes a trained model's choice. Measured
// here over 10 seeds: mean |Δ logprob| 4e-3..1.1e-2 nats (f32 KV against f16 KV: 3e-4), greedy
// agreement 95.8..100 % of 48 steps. Bounds: mean |Δ logprob| <= 0.03 nats and agreement >= 87.5 %
// (at most 6 flips in 48 steps): these random-weight models have flat distributions, where top-2
// margins of a few hundredths of a nat are common, so a flip or two is expected and not a bug; a
// wrong scale or a misplaced group gives Δ of whole nats. Capacity: for head dim 64, 34 bytes per
// 32 values against 64, so the same budget holds >= 1.85x the tokens (1.88x measured; head dim 32
// pads each row's one scale to a word: 36 bytes, 1.78x).

import { Engine } from "../../engine/engine.ts";
import { writeTinyModel } from "../../engine/sources/tiny_model.ts";
import { measureKvDtypeAccuracy, measureKvDtypeCapacity } from "../../bench/kv_dtype.ts";
import { assert } from "../helpers/testing.ts";
import { testGpu } from "../helpers/gpu.ts";
import { rng, testSeed } from "../helpers/random.ts";

const MEAN_ABS_DLOGPROB = 0.03;
const GREEDY_AGREEMENT = 0.875;
const CAPACITY_RATIO = 1.85;

const SPECS = [
  {
    name: "hd 32, GQA 4:2",
    hiddenSize: 128,
    intermediateSize: 256,
    numLayers: 2,
    numHeads: 4,
    numKvHeads: 2,
    headDim: 32,
    tied: true,
    dtype: "F16",
  },
  {
    name: "hd 64, MHA, 3 layers",
    hiddenSize: 128,
    intermediateSize: 200,
    numLayers: 3,
    numHeads: 2,
    numKvHeads: 2,
    headDim: 64,
    tied: false,
    dtype: "BF16",
  },
] as const;

Deno.test("q8_0 KV against f16 KV on generated models: greedy agreement, logprob difference, capacity", async (t) => {
  const gpu = await testGpu();
  if (!gpu.f16) return; // no shader-f16: no f16 KV to compare with
  for (const { name, ...spec } of SPECS) {
    await t.step(name, async () => {
      const seed = testSeed();
      const dir = await Deno.makeTempDir({ prefix: "sluice-kv-q8-" });
      try {
        await writeTinyModel(dir, { ...spec, seed });
        const next = rng(seed + 1);
        // Odd prompt lengths, so blocks end part-filled.
        const prompts = [5, 23, 40].map((n) =>
          Array.from({ length: n }, () => Math.floor(next() * 300))
        );
        const acc = await measureKvDtypeAccuracy({
          modelDir: dir,
          gpu,
          prompts,
          steps: 16,
          gpuKvMb: 1,
          baseline: "f16",
          candidate: "q8_0",
        });
        const [f16, q8] = await measureKvDtypeCapacity(gpu, dir, 1, 64, 4, ["f16", "q8_0"]);
        console.log(
          `${name} (seed ${seed}): ${acc.steps} steps, greedy agreement ` +
            `${(100 * acc.greedyAgreement).toFixed(1)} %, |Δ logprob| mean ` +
            `${acc.meanAbsDLogprob.toExponential(2)} max ${acc.maxAbsDLogprob.toExponential(2)} ` +
            `(any token ${acc.maxAbsDLogprobAnyToken.toExponential(2)}); 1 MiB holds ` +
            `${f16.tokens} tokens in f16, ${q8.tokens} in q8_0 (${
              (q8.tokens / f16.tokens).toFixed(2)
            }x)`,
        );
        const where = `${name}, seed ${seed}`;
        assert(
          acc.meanAbsDLogprob <= MEAN_ABS_DLOGPROB,
          `${where}: mean |Δ logprob| ${acc.meanAbsDLogprob}`,
        );
        assert(
          acc.greedyAgreement >= GREEDY_AGREEMENT,
          `${where}: greedy agreement ${acc.greedyAgreement}`,
        );
        assert(Number.isFinite(acc.maxAbsDLogprobAnyToken), `${where}: non-finite logprobs`);
        assert(q8.blockBytes < f16.blockBytes, `${where}: q8_0 blocks are not smaller`);
        if (spec.headDim === 64) {
          assert(
            q8.tokens >= CAPACITY_RATIO * f16.tokens,
            `${where}: ${q8.tokens} vs ${f16.tokens} tokens`,
          );
        }
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    });
  }
});

Deno.test("q8_0 KV refuses a model whose head dim is not a multiple of 32, naming the flag", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-kv-q8-" });
  try {
    await writeTinyModel(dir, {
      hiddenSize: 64,
      intermediateSize: 128,
      numLayers: 1,
      numHeads: 4,
      numKvHeads: 2,
      tied: true,
      dtype: "F32",
      seed: 1,
    });
    let message = "";
    try {
      await (await Engine.load({
        modelDir: dir,
        gpu: await testGpu(),
        kvDtype: "q8_0",
        gpuKvMb: 1,
        skipWarmUp: true,
      }))
        .close();
    } catch (e) {
      message = (e as Error).message;
    }
    assert(/--kv-dtype q8_0.*multiple of 32.*16/.test(message), `got: ${message || "no error"}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
