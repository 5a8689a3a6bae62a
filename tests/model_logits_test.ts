// Whole-model checks: GPU logits against the float64 reference forward pass of the same generated
// checkpoint, for every architecture variant the loader must handle, on both dtype paths.

import { DeviceKv } from "../engine/kv/device_kv.ts";
import { BlockPool } from "../engine/kv/block_pool.ts";
import { LlamaForward, type StepRow } from "../engine/model/forward.ts";
import { openModelDir } from "../engine/model/model_dir.ts";
import { type TinyModelSpec, writeTinyModel } from "../engine/model/tiny_model.ts";
import { loadWeights } from "../engine/model/weights.ts";
import type { Gpu } from "../engine/gpu/device.ts";
import { assertClose } from "./helpers/compare.ts";
import { testGpus } from "./helpers/gpu.ts";
import { rng, testSeed } from "./helpers/random.ts";
import { referenceForward } from "./helpers/reference_llama.ts";

const base = {
  hiddenSize: 64,
  intermediateSize: 136,
  numLayers: 2,
  headDim: 16,
  tied: true,
  dtype: "F32",
} as const;

const VARIANTS: { name: string; spec: Omit<TinyModelSpec, "seed"> }[] = [
  { name: "MHA", spec: { ...base, numHeads: 4, numKvHeads: 4 } },
  { name: "GQA", spec: { ...base, numHeads: 4, numKvHeads: 2, tied: false } },
  { name: "MQA", spec: { ...base, numHeads: 4, numKvHeads: 1 } },
  { name: "explicit head_dim", spec: { ...base, numHeads: 2, numKvHeads: 1, headDim: 48 } },
  {
    name: "llama3 rope scaling",
    spec: {
      ...base,
      numHeads: 4,
      numKvHeads: 2,
      ropeTheta: 500000,
      ropeScaling: {
        type: "llama3",
        factor: 8,
        lowFreqFactor: 1,
        highFreqFactor: 4,
        originalMaxPositionEmbeddings: 64,
      },
    },
  },
  {
    name: "linear rope scaling",
    spec: { ...base, numHeads: 4, numKvHeads: 2, ropeScaling: { type: "linear", factor: 4 } },
  },
  { name: "sharded", spec: { ...base, numHeads: 4, numKvHeads: 2, shards: 3, tied: false } },
  { name: "bf16 weights", spec: { ...base, numHeads: 4, numKvHeads: 2, dtype: "BF16" } },
  { name: "f16 weights", spec: { ...base, numHeads: 4, numKvHeads: 2, dtype: "F16" } },
];

/**
 * Bounds, relative to the largest |logit|. f32 path: only summation order differs from the
 * float64 reference. f16 path: weights (unless already f16) and KV are rounded to f16 on the GPU,
 * while the reference keeps full precision, so the bound covers f16 rounding through 2 layers.
 */
const BOUND = { f32: 2e-4, f16: 2e-2 };

interface Harness {
  forward: LlamaForward;
  pool: BlockPool;
  kv: DeviceKv;
}

async function harness(
  gpu: Gpu,
  dir: string,
  maxSlots = 32,
  maxRows = 64,
): Promise<Harness & { ids: (n: number, seed: number) => number[] }> {
  const files = await openModelDir(dir);
  const cfg = files.config;
  const weights = await loadWeights(gpu, files);
  const layout = DeviceKv.layoutForBudget(
    gpu,
    { numLayers: cfg.numLayers, numKvHeads: cfg.numKvHeads, headDim: cfg.headDim },
    4 << 20,
    maxSlots,
    256,
    16,
  );
  const kv = new DeviceKv(gpu, layout);
  const pool = new BlockPool(cfg.numLayers, layout.numBlocks);
  const forward = new LlamaForward(gpu, cfg, weights, kv, {
    maxRows,
    maxSlots,
    maxTopLogprobs: 5,
    ringSize: 2,
  });
  const ids = (n: number, seed: number) => {
    const next = rng(seed);
    return Array.from({ length: n }, () => Math.floor(next() * cfg.vocabSize));
  };
  return { forward, pool, kv, ids };
}

/** Reserves KV for `tokens` positions of sequence `seqId` in `slot` on every layer. */
function reserve(h: Harness, seqId: number, slot: number, tokens: number): void {
  const layers = h.forward.cfg.numLayers;
  for (let l = 0; l < layers; l++) {
    if (!h.pool.grow(seqId, l, tokens)) throw new Error("test pool too small");
    h.kv.writeTable(slot, l, h.pool.table(seqId, l));
  }
}

Deno.test("GPU logits match the float64 reference forward pass", async (t) => {
  const seed = testSeed();
  const gpus = await testGpus();
  for (const variant of VARIANTS) {
    const dir = await Deno.makeTempDir({ prefix: "sluice-logits-" });
    try {
      await writeTinyModel(dir, { ...variant.spec, seed });
      const files = await openModelDir(dir);
      for (const { label, gpu } of gpus) {
        await t.step(`${variant.name} (${label})`, async () => {
          const h = await harness(gpu, dir);
          const prompt = h.ids(19, seed + 1);
          reserve(h, 1, 0, prompt.length);
          h.forward.setSampling(0, { temperature: 0, topK: 0, topP: 1, seed: 0 });
          // Chunked prefill: 8 rows without samples, then the rest sampling at every row.
          const rows = (from: number, to: number): StepRow[] =>
            prompt.slice(from, to).map((token, i) => ({ slot: 0, pos: from + i, token }));
          await h.forward.submit({ rows: rows(0, 8), samples: [], wantTopLogprobs: false });
          const tail = rows(8, prompt.length);
          await h.forward.submit({
            rows: tail,
            samples: tail.map((_, row) => ({ row })),
            wantTopLogprobs: false,
          });
          const got = await h.forward.readLogits(tail.length);
          const want = await referenceForward(files, prompt);
          tail.forEach((r, i) => {
            assertClose(
              got[i],
              want[r.pos],
              BOUND[label as "f32" | "f16"],
              `${variant.name} ${label} pos ${r.pos} (seed ${seed})`,
            );
          });
        });
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }
});
