// A forward pass over a model's files for engine tests that drive LlamaForward directly: the
// weights loaded (in storage or textures), a KV cache and block pool sized for a few slots, and
// `reserve` to give a slot its blocks on every layer and greedy sampling; and greedyDecode, a
// prompt then a few decode steps over several slots, recording tokens and logits.

import type { Gpu } from "../../engine/gpu/device.ts";
import type { WeightLayout } from "../../engine/gpu/weight_texture.ts";
import { DeviceKv } from "../../engine/kv/device_kv.ts";
import { BlockPool } from "../../runtime/kv/block_pool.ts";
import { type ForwardBenchOptions, LlamaForward } from "../../engine/forward/forward.ts";
import type { ModelFiles } from "../../engine/formats/model_files.ts";
import { loadWeights } from "../../engine/weights/load_weights.ts";
import type { ModelWeights } from "../../engine/weights/model_weights.ts";
import type { StepRow } from "../../engine/forward/step.ts";
import { assert } from "./testing.ts";
import { rng } from "./random.ts";

export interface TinyForwardOptions {
  maxSlots: number;
  maxRows: number;
  /** Positions a slot may hold (default 64). */
  maxContext?: number;
  maxTopLogprobs?: number;
  layout?: WeightLayout;
  bench?: ForwardBenchOptions;
}

export interface TinyForward {
  forward: LlamaForward;
  weights: ModelWeights;
  /** Slot `slot` gets blocks for `positions` positions on every layer, and greedy sampling. */
  reserve(slot: number, positions: number): void;
  /** Waits for the GPU, then frees the pass, the KV and the weights. */
  destroy(): Promise<void>;
}

export async function tinyForward(
  gpu: Gpu,
  files: ModelFiles,
  options: TinyForwardOptions,
): Promise<TinyForward> {
  const cfg = files.config;
  const weights = await loadWeights(gpu, files, undefined, options.layout ?? "storage");
  const layout = DeviceKv.layoutForBudget(
    gpu,
    { numLayers: cfg.numLayers, numKvHeads: cfg.numKvHeads, headDim: cfg.headDim },
    4 << 20,
    options.maxSlots,
    options.maxContext ?? 64,
    16,
  );
  const kv = new DeviceKv(gpu, layout);
  const pool = new BlockPool(layout);
  const forward = new LlamaForward(gpu, cfg, weights, kv, {
    maxRows: options.maxRows,
    maxSlots: options.maxSlots,
    maxTopLogprobs: options.maxTopLogprobs ?? 0,
    ringSize: 2,
  }, options.bench);
  const matrices = [
    weights.embed,
    weights.lmHead,
    ...weights.layers.flatMap((l) => [l.qkv, l.o, l.gateUp, l.down]),
  ];
  return {
    forward,
    weights,
    reserve(slot, positions) {
      for (let l = 0; l < cfg.numLayers; l++) {
        assert(pool.grow(slot, l, positions), "test pool too small");
        kv.writeTable(slot, l, pool.table(slot, l));
      }
      forward.setSampling(slot, { temperature: 0, topK: 0, topP: 1, seed: 0 });
    },
    async destroy() {
      await forward.idle();
      forward.destroy();
      kv.destroy();
      for (const m of new Set(matrices)) {
        for (const p of m.parts) (p.buffer ?? p.texture).destroy();
      }
    },
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
  files: ModelFiles,
  { batch, prompt, decode, seed, afterStep }: {
    batch: number;
    prompt: number;
    decode: number;
    seed: number;
    afterStep?: () => Promise<void>;
  },
): Promise<GreedyRun> {
  const vocab = files.config.vocabSize;
  const next = rng(seed);
  const run: GreedyRun = { tokens: Array.from({ length: batch }, () => []), logits: [] };
  for (let slot = 0; slot < batch; slot++) tf.reserve(slot, prompt + decode);
  const step = async (rows: StepRow[], sampled: number[]) => {
    const samples = sampled.map((row) => ({ row }));
    const records = await tf.forward.submit({ rows, samples, wantTopLogprobs: false });
    await afterStep?.();
    for (const l of await tf.forward.readLogits(samples.length)) {
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
