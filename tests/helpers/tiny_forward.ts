// An engine over a model directory for engine tests that drive the forward pass step by step:
// opened through Engine.load (the weights in storage or textures, no warm-up), a block pool sized
// for a few slots, and `reserve` to give a slot its blocks on every layer and greedy sampling; and
// greedyDecode, a prompt then a few decode steps over several slots, recording tokens and logits.

import { Engine, type Gpu, type StepRow, type TableWrite } from "../../engine/engine.ts";
import type { WeightLayout } from "../../engine/gpu/weight_texture.ts";
import { BlockPool } from "../../runtime/kv/block_pool.ts";
import { assert } from "./testing.ts";
import { rng } from "./random.ts";

export interface TinyForwardOptions {
  maxSlots: number;
  maxRows: number;
  maxTopLogprobs?: number;
  layout?: WeightLayout;
}

export interface TinyForward {
  engine: Engine;
  /**
   * Slot `slot` gets blocks for `positions` positions on every layer, and greedy sampling: both
   * go with the next step (`pending`).
   */
  reserve(slot: number, positions: number): void;
  /** Tables and sampling `reserve` set since the last step, for the next one; then empties. */
  pending(): { tables: TableWrite[]; sampling: { slot: number; params: typeof GREEDY }[] };
  /** Waits for the GPU, then frees the engine. */
  destroy(): Promise<void>;
}

const GREEDY = { temperature: 0, topK: 0, topP: 1, seed: 0 };

export async function tinyForward(
  gpu: Gpu,
  dir: string,
  options: TinyForwardOptions,
): Promise<TinyForward> {
  const engine = await Engine.load({
    modelDir: dir,
    gpu,
    gpuKvMb: 4,
    maxSlots: options.maxSlots,
    maxRows: options.maxRows,
    maxTopLogprobs: options.maxTopLogprobs ?? 0,
    ringSize: 2,
    matmulKernel: options.layout ?? "storage",
    skipWarmUp: true,
  });
  const pool = new BlockPool(engine.info);
  let tables: TableWrite[] = [];
  let sampling: { slot: number; params: typeof GREEDY }[] = [];
  return {
    engine,
    reserve(slot, positions) {
      for (let layer = 0; layer < engine.info.numLayers; layer++) {
        assert(pool.grow(slot, layer, positions), "test pool too small");
        tables.push({ slot, layer, first: 0, blocks: pool.table(slot, layer) });
      }
      sampling.push({ slot, params: GREEDY });
    },
    pending() {
      const p = { tables, sampling };
      tables = [], sampling = [];
      return p;
    },
    destroy: () => engine.close(),
  };
}

/** What greedyDecode saw: each slot's sampled ids, and every sampled row's logits as bits. */
export interface GreedyRun {
  tokens: number[][];
  logits: Uint32Array[];
}

/**
 * Slots 0..batch-1 prefill `prompt` random tokens each (from `seed`) in one step, then decode
 * `decode` steps together, each row's token the one the sampler wrote for its slot. `afterStep`
 * runs after each step's records are back.
 */
export async function greedyDecode(
  tf: TinyForward,
  { batch, prompt, decode, seed, afterStep }: {
    batch: number;
    prompt: number;
    decode: number;
    seed: number;
    afterStep?: () => Promise<void>;
  },
): Promise<GreedyRun> {
  const vocab = tf.engine.info.vocabSize;
  const next = rng(seed);
  const run: GreedyRun = { tokens: Array.from({ length: batch }, () => []), logits: [] };
  for (let slot = 0; slot < batch; slot++) tf.reserve(slot, prompt + decode);
  const step = async (rows: StepRow[], sampled: number[]) => {
    const samples = sampled.map((row) => ({ row }));
    const records = await tf.engine.step({
      ...tf.pending(),
      rows,
      samples,
      wantTopLogprobs: false,
    });
    await afterStep?.();
    for (const l of await tf.engine.readLogits(samples.length)) {
      run.logits.push(new Uint32Array(Float32Array.from(l).buffer));
    }
    records.forEach((r, i) => run.tokens[i].push(r.id));
  };
  const rows: StepRow[] = [];
  for (let slot = 0; slot < batch; slot++) {
    for (let pos = 0; pos < prompt; pos++) {
      rows.push({ slot, pos, token: Math.floor(next() * vocab) });
    }
  }
  await step(rows, Array.from({ length: batch }, (_, s) => s * prompt + prompt - 1));
  for (let d = 0; d < decode; d++) {
    const decodeRows = Array.from({ length: batch }, (_, slot) => ({
      slot,
      pos: prompt + d,
      token: null,
    }));
    await step(decodeRows, decodeRows.map((_, i) => i));
  }
  return run;
}
