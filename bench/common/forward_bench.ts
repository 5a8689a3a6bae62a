// The pieces bench step-split and bench decode's step timing share: the SmolLM2-shaped model
// loaded with every batch slot's KV reserved, a forward pass over it with greedy sampling in every
// slot, a decode plan of one row per slot, and timing of awaited steps.

import type { Gpu } from "../../engine/gpu/device.ts";
import type { WeightLayout } from "../../engine/gpu/weight_texture.ts";
import { DeviceKv } from "../../engine/kv/device_kv.ts";
import { type ForwardBenchOptions, LlamaForward } from "../../engine/forward/forward.ts";
import type { StepPlan } from "../../engine/forward/step.ts";
import { openModelDir } from "../../engine/formats/open_model.ts";
import type { LlamaConfig } from "../../engine/model/config.ts";
import { loadWeights } from "../../engine/weights/load_weights.ts";
import type { ModelWeights } from "../../engine/weights/model_weights.ts";
import { BlockPool } from "../../runtime/kv/block_pool.ts";

export const LIMITS = { maxRows: 16, maxSlots: 16, maxTopLogprobs: 0, ringSize: 2 };
const GREEDY = { temperature: 0, topK: 0, topP: 1, seed: 0 };

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** A model's weights and KV, with every batch slot's blocks reserved for `context` + 1 positions. */
export interface Loaded {
  cfg: LlamaConfig;
  weights: ModelWeights;
  kv: DeviceKv;
}

export async function load(
  gpu: Gpu,
  path: string,
  context: number,
  weightLayout: WeightLayout = "storage",
): Promise<Loaded> {
  const files = await openModelDir(path);
  const cfg = files.config;
  const weights = await loadWeights(gpu, files, undefined, weightLayout);
  const dims = { numLayers: cfg.numLayers, numKvHeads: cfg.numKvHeads, headDim: cfg.headDim };
  // Room for every slot's blocks on every layer, and the block tables.
  const blocks = cfg.numLayers * LIMITS.maxSlots * Math.ceil((context + 16) / 16);
  const budget = blocks * 2 * DeviceKv.bytesPerBlock(gpu, { ...dims, blockSize: 16 }) + 2 ** 20;
  const layout = DeviceKv.layoutForBudget(gpu, dims, budget, LIMITS.maxSlots, context + 16, 16);
  const kv = new DeviceKv(gpu, layout);
  const pool = new BlockPool(layout);
  for (let slot = 0; slot < LIMITS.maxSlots; slot++) {
    for (let l = 0; l < cfg.numLayers; l++) {
      if (!pool.grow(slot + 1, l, context + 1)) throw new Error("step-split: KV pool too small");
      kv.writeTable(slot, l, pool.table(slot + 1, l));
    }
  }
  return { cfg, weights, kv };
}

export function forwardOf(gpu: Gpu, m: Loaded, options: ForwardBenchOptions): LlamaForward {
  const f = new LlamaForward(gpu, m.cfg, m.weights, m.kv, LIMITS, options);
  for (let slot = 0; slot < LIMITS.maxSlots; slot++) f.setSampling(slot, GREEDY);
  return f;
}

/** One decode row per slot at position `context`, its token the one the sampler wrote. */
export function decodePlan(batch: number, context: number): StepPlan {
  return {
    rows: Array.from({ length: batch }, (_, slot) => ({ slot, pos: context, token: null })),
    samples: Array.from({ length: batch }, (_, row) => ({ row })),
    wantTopLogprobs: false,
  };
}

/** One step, submitted and awaited. */
export type Step = () => Promise<unknown>;

/** ms of each of `steps` steps, each submitted and awaited alone, after one untimed step. */
export async function timeSteps(step: Step, steps: number): Promise<number[]> {
  await step();
  const times: number[] = [];
  for (let i = 0; i < steps; i++) {
    const t0 = performance.now();
    await step();
    times.push(performance.now() - t0);
  }
  return times;
}
