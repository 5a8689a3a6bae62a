// What bench step-split and bench decode's step timing share: an engine opened through
// Engine.load with every batch slot's KV reserved and greedy sampling in every slot; kernel lists
// made from the engine's own (kinds left out, the greedy sampler swapped for the one-workgroup
// one) and counted by kind; a decode plan of one row per slot; and timing of awaited steps.

import {
  type BoundKernel,
  Engine,
  type ForwardKernels,
  type Gpu,
  type KernelKind,
  type StepPlan,
} from "../../engine/engine.ts";
import { openModelDir } from "../../engine/bench_api.ts";
import { BlockPool } from "../../runtime/bench_api.ts";

/** Batch slots, and so the most decode rows a step has. */
export const SLOTS = 16;
const BLOCK = 16;
const GREEDY = { temperature: 0, topK: 0, topP: 1, seed: 0 };

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * The model at `path` loaded (its float weights in `layout`), with every batch slot's blocks
 * reserved for `context` + 1 positions on every layer and greedy sampling in every slot.
 */
export async function openForwardBench(
  gpu: Gpu,
  path: string,
  context: number,
  layout: "storage" | "texture" = "storage",
): Promise<Engine> {
  const cfg = (await openModelDir(path)).config;
  // Room for every slot's blocks on every layer, at f32 KV (the widest a default cache takes),
  // and the block tables.
  const blocks = cfg.numLayers * SLOTS * Math.ceil((context + BLOCK) / BLOCK);
  const blockBytes = 2 * BLOCK * cfg.numKvHeads * cfg.headDim * 4;
  const tableBytes = cfg.numLayers * SLOTS * Math.ceil(cfg.maxPositionEmbeddings / BLOCK) * 4;
  const engine = await Engine.load({
    modelDir: path,
    gpu,
    gpuKvMb: (blocks * blockBytes + tableBytes) / 2 ** 20 + 1,
    maxSlots: SLOTS,
    maxRows: SLOTS,
    maxTopLogprobs: 0,
    ringSize: 2,
    blockSize: BLOCK,
    matmulKernel: layout,
    skipWarmUp: true,
  });
  const pool = new BlockPool(engine.info);
  const tables: StepPlan["tables"] = [];
  for (let slot = 0; slot < SLOTS; slot++) {
    for (let layer = 0; layer < cfg.numLayers; layer++) {
      if (!pool.grow(slot + 1, layer, context + 1)) throw new Error("KV pool too small");
      tables.push({ slot, layer, first: 0, blocks: pool.table(slot + 1, layer) });
    }
  }
  // The tables and sampling go with a first step: one row per slot at position 0.
  await engine.step({
    tables,
    sampling: Array.from({ length: SLOTS }, (_, slot) => ({ slot, params: GREEDY })),
    rows: Array.from({ length: SLOTS }, (_, slot) => ({ slot, pos: 0, token: 0 })),
    samples: [],
    wantTopLogprobs: false,
  });
  return engine;
}

/** What a left-out sampler encodes. */
const SKIPPED: BoundKernel = { kind: "sampler", encode() {} };

/** `k` without the kernels of `kinds` (the sampling controls always stay: bench step-split). */
export function withoutKinds(k: ForwardKernels, kinds: ReadonlySet<KernelKind>): ForwardKernels {
  const keep = (x: BoundKernel) => x.kind === undefined || !kinds.has(x.kind);
  return {
    ...k,
    head: k.head.filter(keep),
    layers: k.layers.map((kernels) => kernels.filter(keep)),
    tail: k.tail.filter(keep),
    samplers: kinds.has("sampler") ? { plain: SKIPPED, top: SKIPPED, greedy: SKIPPED } : k.samplers,
  };
}

/** `k` with greedy steps taking the one-workgroup sampler too (to compare the two). */
export function withPlainSampler(k: ForwardKernels): ForwardKernels {
  return { ...k, samplers: { ...k.samplers, greedy: k.samplers.plain } };
}

/** Each kind's kernels in one step's head, layers and tail. */
export function kernelsByKind(k: ForwardKernels): Map<KernelKind | "other", number> {
  const counts = new Map<KernelKind | "other", number>();
  for (const x of [...k.head, ...k.layers.flat(), ...k.tail]) {
    counts.set(x.kind ?? "other", (counts.get(x.kind ?? "other") ?? 0) + 1);
  }
  return counts;
}

/** One decode row per slot at position `context`, its token the one the sampler wrote. */
export function decodePlan(batch: number, context: number): StepPlan {
  return {
    tables: [],
    sampling: [],
    rows: Array.from({ length: batch }, (_, slot) => ({ slot, pos: context, token: null })),
    samples: Array.from({ length: batch }, (_, row) => ({ row })),
    wantTopLogprobs: false,
  };
}

/** One step, submitted and awaited. */
export type Step = () => Promise<unknown>;

/** `engine`'s step of `plan`, encoding `kernels` (made from the engine's own). */
export function stepWith(engine: Engine, kernels: ForwardKernels, plan: StepPlan): Step {
  return () => {
    engine.useKernels(kernels);
    return engine.step(plan);
  };
}

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
