// Whole-model checks, through Engine.step: GPU logits against the float64 reference forward pass of
// the same generated checkpoint, for every architecture variant the loader must handle, on both
// dtype paths; and two requests whose layers' blocks interleave in one shared pool.

import { Engine, type Gpu, type StepRow, type TableWrite } from "../../../engine/engine.ts";
import { BlockPool, type SeqId } from "../../../runtime/kv/block_pool.ts";
import { openModelDir } from "../../../engine/formats/open_model.ts";
import { type TinyModelSpec, writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import { assertClose } from "../../helpers/compare.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { testGpus } from "../../helpers/gpu.ts";
import { rng, testSeed } from "../../helpers/random.ts";
import { referenceForward } from "../../helpers/reference_llama.ts";

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
  // The other families: Qwen2's q, k, v biases; Qwen3's q and k norms with a head_dim other than
  // hidden / heads; Mistral's window, smaller than the 19-token prompt so that it bites.
  {
    name: "qwen2",
    spec: { ...base, architecture: "qwen2", numHeads: 4, numKvHeads: 2, tied: false },
  },
  {
    name: "qwen3",
    spec: { ...base, architecture: "qwen3", numHeads: 4, numKvHeads: 2, headDim: 24 },
  },
  {
    name: "mistral, window 8",
    spec: { ...base, architecture: "mistral", numHeads: 4, numKvHeads: 2, slidingWindow: 8 },
  },
];

/**
 * Bounds, relative to the largest |logit|. f32 path: only summation order differs from the
 * float64 reference. f16 path: weights (unless already f16) and KV are rounded to f16 on the GPU,
 * while the reference keeps full precision, so the bound covers f16 rounding through 2 layers.
 */
const BOUND = { f32: 2e-4, f16: 2e-2 };

interface Harness {
  engine: Engine;
  pool: BlockPool;
}

async function harness(
  gpu: Gpu,
  dir: string,
  maxSlots = 32,
  maxRows = 64,
): Promise<Harness & { ids: (n: number, seed: number) => number[] }> {
  const engine = await Engine.load({
    modelDir: dir,
    gpu,
    gpuKvMb: 4,
    maxSlots,
    maxRows,
    maxTopLogprobs: 5,
    ringSize: 2,
    skipWarmUp: true,
  });
  const pool = new BlockPool(engine.info);
  const ids = (n: number, seed: number) => {
    const next = rng(seed);
    return Array.from({ length: n }, () => Math.floor(next() * engine.info.vocabSize));
  };
  return { engine, pool, ids };
}

/** KV for `tokens` positions of sequence `seqId` in `slot` on every layer: the table writes. */
function reserve(h: Harness, seqId: number, slot: number, tokens: number): TableWrite[] {
  const layers = h.engine.info.numLayers;
  const writes: TableWrite[] = [];
  for (let l = 0; l < layers; l++) {
    if (!h.pool.grow(seqId, l, tokens)) throw new Error("test pool too small");
    writes.push({ slot, layer: l, first: 0, blocks: h.pool.table(seqId, l) });
  }
  return writes;
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
          // Chunked prefill: 8 rows without samples, then the rest sampling at every row.
          const rows = (from: number, to: number): StepRow[] =>
            prompt.slice(from, to).map((token, i) => ({ slot: 0, pos: from + i, token }));
          await h.engine.step({
            tables: reserve(h, 1, 0, prompt.length),
            sampling: [{ slot: 0, params: { temperature: 0, topK: 0, topP: 1, seed: 0 } }],
            rows: rows(0, 8),
            samples: [],
            wantTopLogprobs: false,
          });
          const tail = rows(8, prompt.length);
          await h.engine.step({
            tables: [],
            sampling: [],
            rows: tail,
            samples: tail.map((_, row) => ({ row })),
            wantTopLogprobs: false,
          });
          const got = await h.engine.readLogits(tail.length);
          await h.engine.close();
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

/** A binding limit that holds the tiny model's largest weight but not one layer's share of KV. */
const SPLIT_BINDING = 256 << 10;

Deno.test("interleaved blocks of layers sharing one pool give the reference logits", async (t) => {
  const seed = testSeed();
  const dir = await Deno.makeTempDir({ prefix: "sluice-logits-pool-" });
  try {
    await writeTinyModel(dir, { ...VARIANTS.find((v) => v.name === "GQA")!.spec, seed });
    const files = await openModelDir(dir);
    const next = rng(seed + 2);
    const ids = (n: number) =>
      Array.from({ length: n }, () => Math.floor(next() * files.config.vocabSize));
    const prompts = [ids(27), ids(13)];
    const want = [
      await referenceForward(files, prompts[0]),
      await referenceForward(files, prompts[1]),
    ];
    for (const { label, gpu } of await testGpus()) {
      // "shared": both layers in one arena; "split": the binding limit forces an arena per layer,
      // so both layers use the same block ids, each in its own buffers.
      for (const arenas of ["shared", "split"] as const) {
        await t.step(`${label}, ${arenas} arena`, async () => {
          const engine = await Engine.load({
            modelDir: dir,
            gpu: arenas === "shared" ? gpu : { ...gpu, maxBinding: SPLIT_BINDING },
            gpuKvMb: 1,
            maxSlots: 8,
            maxRows: 16,
            blockSize: 4,
            maxTopLogprobs: 5,
            ringSize: 2,
            skipWarmUp: true,
          });
          try {
            await runInterleaved(engine, arenas, prompts, want, BOUND[label as "f32" | "f16"]);
          } catch (e) {
            throw new Error(`seed ${seed}: ${(e as Error).message}`, { cause: e });
          } finally {
            await engine.close();
          }
        });
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/**
 * Request 0 (slot 0) and request 1 (slot 1) prefill in chunks of one block, side by side, each
 * growing every layer by a block per step, so their layers' blocks interleave in the pool. Then
 * request 1 finishes and request 0 goes on into the blocks it freed. Every row's logits are
 * checked against the float64 reference.
 */
async function runInterleaved(
  engine: Engine,
  arenas: "shared" | "split",
  prompts: number[][],
  want: Float64Array[][],
  bound: number,
): Promise<void> {
  const { info } = engine;
  assertEquals(info.blockSize, 4);
  assertEquals(info.layerArena, arenas === "shared" ? [0, 0] : [0, 1]);
  const pool = new BlockPool(info);
  const tables = (id: SeqId) => [0, 1].map((l) => pool.table(id, l));
  const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
  let sampling = [0, 1].map((slot) => ({ slot, params: greedy }));

  /** One step: chunk [from, to) of each listed request (id = slot), every row sampled. */
  const step = async (chunks: { id: number; from: number; to: number }[]) => {
    const writes: TableWrite[] = [];
    const rows: StepRow[] = [];
    for (const { id, from, to } of chunks) {
      const added = pool.growAll(id, to);
      assert(added, "the test pool is too small");
      added.forEach((blocks, layer) => {
        if (blocks.length === 0) return;
        const first = pool.table(id, layer).length - blocks.length;
        writes.push({ slot: id, layer, first, blocks });
      });
      for (let pos = from; pos < to; pos++) rows.push({ slot: id, pos, token: prompts[id][pos] });
    }
    const samples = rows.map((_, row) => ({ row }));
    await engine.step({ tables: writes, sampling, rows, samples, wantTopLogprobs: false });
    sampling = [];
    const got = await engine.readLogits(rows.length);
    rows.forEach((r, i) => {
      assertClose(got[i], want[r.slot][r.pos], bound, `${arenas}: request ${r.slot} pos ${r.pos}`);
    });
  };

  // Side by side: 20 tokens of request 0 and all 13 of request 1, one block per step.
  for (let from = 0; from < 20; from += 4) {
    const chunks = [{ id: 0, from, to: from + 4 }];
    if (from < 13) chunks.push({ id: 1, from, to: Math.min(from + 4, 13) });
    await step(chunks);
  }
  if (arenas === "shared") {
    // Each step took one block per (request, layer) in turn from the one free list.
    assertEquals(tables(0), [[0, 4, 8, 12, 16], [1, 5, 9, 13, 17]]);
    assertEquals(tables(1), [[2, 6, 10, 14], [3, 7, 11, 15]]);
  } else {
    // The same block ids on both layers, in different buffers.
    assertEquals(tables(0), [[0, 2, 4, 6, 8], [0, 2, 4, 6, 8]]);
    assertEquals(tables(1), [[1, 3, 5, 7], [1, 3, 5, 7]]);
  }

  // Request 1 finishes; request 0 goes on, into its freed blocks where they are next in line.
  const freed = tables(1);
  assertEquals(pool.release(1), 8);
  await step([{ id: 0, from: 20, to: 24 }]);
  await step([{ id: 0, from: 24, to: 27 }]);
  if (arenas === "shared") {
    // Layer 0 takes request 1's layer-0 block 2, then extends into its layer-1 block 3.
    assertEquals(tables(0), [[0, 4, 8, 12, 16, 2, 3], [1, 5, 9, 13, 17, 18, 19]]);
    assert(freed[1].includes(3), "layer 0 reuses a block that layer 1 held");
  }
  assertEquals(pool.release(0), 14);
  assertEquals(pool.used, 0);
}
