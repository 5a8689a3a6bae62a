// What a step of the runtime's plan would take on a profiled GPU (gpu_profiles.ts): the papers'
// economics, where a decode step of 1 or 32 rows costs about the same and memory is the limit.
//
// Each layer is a roofline, not a sum: the larger of streaming its weights plus the KV its rows
// attend to (at the bandwidth shares the profile measured) and its FLOPs (2 per weight per row,
// plus attention's 4 per head dimension per attended position). So decode is bound by bytes and a
// long prefill by compute. KV copies pay per call (a driver dispatch) plus their bytes over the
// host link. PCIe is full duplex: copies into the device share one direction, copies out the
// other.
//   - A step's swap copies (plan.copies) run before its layers, as vLLM waits on its cache
//     events before the forward pass.
//   - Write-through copies after a layer run out while later layers compute.
//   - Prefetches of offloaded layers (OrbitFlow's Algorithm 1) start as early as the prefetch
//     region allows, and a layer stalls until its blocks are in. By default the region is reused
//     as one, once the last offloaded layer of any request has run; with the profile's
//     prefetchStart "per-request", each copy waits only for the blocks it lands in to have been
//     read (each request has its own part of the region: its own stream, as Algorithm 1 has).
//     Either way the one link carries the copies in the order their layers need them, which is
//     what gives Fig. 3's stalls (runtime/plan/prefetch_timeline.ts; Algorithm 1's even split of
//     the link does not: tests/runtime/plan/figure3_test.ts).

import type { CostModel, KvCopy, StepPlan } from "../engine/engine.ts";
import { lineOf, sumsOf } from "../engine/bench_api.ts";
import { type Efficiency, modelSizes, type SimProfile } from "./gpu_profiles.ts";

/** Tokens per KV block in every paper's setup (vLLM's and SGLang's default). */
export const SIM_BLOCK_SIZE = 16;

/** Rows of a step as the cost model reads them. */
export interface RowLoad {
  slot: number;
  pos: number;
}

/** The GPU's rates in units of ms. */
function ratesOf(p: SimProfile) {
  const e = p.efficiency;
  const bytesPerMs = p.gpu.bandwidthGBs * 1e6;
  return {
    weightBytesPerMs: bytesPerMs * e.weights,
    /** KV bytes a ms when attention covers `seqs` sequences (Efficiency.attentionAt). */
    kvBytesPerMs: (seqs: number) => bytesPerMs * attentionShare(e, seqs),
    flopsPerMs: p.gpu.tflops * 1e9 * e.compute,
    linkBytesPerMs: p.gpu.linkGBs * 1e6,
    callMs: p.gpu.copyCallUs / 1000,
  };
}

/** Share of peak bandwidth attention reaches over `seqs` sequences: n / (n + n½). */
export function attentionShare(e: Efficiency, seqs: number): number {
  if (e.attentionAt === undefined) return e.attention;
  const half = e.attentionAt * (1 - e.attention) / e.attention;
  return seqs / (seqs + half);
}

/** One layer over `rows`: weights plus attended KV at bandwidth, or FLOPs, whichever is longer. */
export function layerMs(p: SimProfile, rows: readonly RowLoad[]): number {
  if (rows.length === 0) return 0;
  const s = modelSizes(p.model), r = ratesOf(p), m = p.model;
  // Each slot's KV is read once per layer however many of its rows attend to it (a prefill chunk's
  // rows share one pass over it, as flash attention tiles it).
  const context = new Map<number, number>();
  for (const row of rows) context.set(row.slot, Math.max(context.get(row.slot) ?? 0, row.pos + 1));
  const kvBytes = [...context.values()].reduce((a, c) => a + c, 0) * s.kvBytesPerTokenLayer;
  const attended = rows.reduce((a, row) => a + row.pos + 1, 0);
  const flops = 2 * s.layerParams * rows.length + 4 * m.heads * m.headDim * attended;
  return Math.max(
    s.layerWeightBytes / r.weightBytesPerMs + kvBytes / r.kvBytesPerMs(context.size),
    flops / r.flopsPerMs,
  );
}

/** The LM head over `samples` sampled rows. */
export function headMs(p: SimProfile, samples: number): number {
  if (samples === 0) return 0;
  const s = modelSizes(p.model), r = ratesOf(p);
  return Math.max(
    s.headWeightBytes / r.weightBytesPerMs,
    2 * p.model.vocab * p.model.hidden * samples / r.flopsPerMs,
  );
}

/** Blocks (all layers, as the pool counts them) that hold `tokens` tokens' KV on `p`. */
export function blocksFor(p: SimProfile, tokens: number): number {
  return Math.floor(tokens / SIM_BLOCK_SIZE) * p.model.layers;
}

/** Bytes of one block of one layer. */
export function blockBytes(p: SimProfile): number {
  return SIM_BLOCK_SIZE * modelSizes(p.model).kvBytesPerTokenLayer;
}

/** Runs of consecutive block ids: the copy calls a list needs, K and V each. */
function callsOf(blocks: readonly number[]): number {
  let runs = 0;
  blocks.forEach((b, i) => {
    if (i === 0 || b !== blocks[i - 1] + 1) runs++;
  });
  return 2 * runs;
}

/**
 * How the engine issues a step's KV copies: one call per run of consecutive blocks (FastSwitch's
 * block groups; Sluice's pool allocates in runs, kv/block_runs.ts), or one per block, K and V
 * each, as vLLM v0's swap_blocks does whatever the blocks' addresses.
 */
export interface CopyIssue {
  perBlock?: boolean;
  /**
   * The step's copies between the tiers (`plan.copies`: swaps, the prefix tier's moves,
   * write-through) run on a stream of their own beside its kernels (FastSwitch's
   * Multithreading Swap Manager, §3.3), so the step takes the longer of the two instead of their
   * sum. WebGPU has one queue, so the real engine cannot; the simulation can. Optimistic by up to
   * a step for a request swapped in: the paper's swapped-in request joins once its copies land.
   */
  async?: boolean;
  /** µs a call, in place of the profile's (a sweep of that unsettled constant). */
  callUs?: number;
}

/** ms of copying `copies` over the link, one after another. */
export function copiesMs(
  p: SimProfile,
  copies: readonly KvCopy[],
  issue: CopyIssue = {},
): number {
  const r = ratesOf(p), bytes = blockBytes(p);
  const callMs = issue.callUs === undefined ? r.callMs : issue.callUs / 1000;
  return copies.reduce(
    (t, c) =>
      t +
      (issue.perBlock ? 2 * c.deviceBlocks.length : callsOf(c.deviceBlocks)) * callMs +
      c.deviceBlocks.length * bytes / r.linkBytesPerMs,
    0,
  );
}

/** The latest time any of `blocks` was last read (`start` for blocks not read yet this step). */
function lastReadAt(blocks: readonly number[], freeAt: Map<number, number>, start: number): number {
  let free = start;
  for (const b of blocks) free = Math.max(free, freeAt.get(b) ?? start);
  return free;
}

/** How long `plan` takes on the profiled GPU, ms. */
export function gpuStepMs(p: SimProfile, plan: StepPlan, issue: CopyIssue = {}): number {
  const steps = plan.group?.steps ?? 1;
  const perLayer = layerMs(p, plan.rows);
  const head = headMs(p, plan.samples.length);
  const layers = p.model.layers;
  const swaps = copiesMs(p, plan.copies ?? [], issue);
  let t = issue.async ? 0 : swaps;
  let inBus = swaps, outBus = swaps, regionFreeAt = t;
  const start = t;
  const perRequest = p.prefetchStart === "per-request";
  /** When each region block was last read (per-request streams). */
  const blockFreeAt = new Map<number, number>();
  for (let l = 0; l < layers; l++) {
    const prefetch = (plan.prefetch ?? []).filter((x) => x.layer === l);
    if (perRequest) {
      for (const x of prefetch) {
        inBus = Math.max(inBus, lastReadAt(x.deviceBlocks, blockFreeAt, start)) +
          copiesMs(p, [{ direction: "in" as const, ...x }]);
        t = Math.max(t, inBus);
      }
    } else if (prefetch.length > 0) {
      const copies = prefetch.map((x) => ({ direction: "in" as const, ...x }));
      inBus = Math.max(inBus, regionFreeAt) + copiesMs(p, copies, issue);
      t = Math.max(t, inBus);
    }
    t += perLayer;
    if (prefetch.length > 0) regionFreeAt = t;
    if (perRequest) {
      for (const x of prefetch) for (const b of x.deviceBlocks) blockFreeAt.set(b, t);
    }
    const after = (plan.copiesAfterLayer ?? []).filter((c) => c.layer === l);
    if (after.length > 0) outBus = Math.max(outBus, t) + copiesMs(p, after, issue);
  }
  const compute = t + head + (steps - 1) * (layers * perLayer + head);
  return p.efficiency.stepOverheadMs + Math.max(compute, outBus);
}

/**
 * The cost model the runtime would profile at start-up on this GPU: a layer line through decode
 * steps (rows at a 512-token context) and prefill chunks, the head's line, copy lines with their
 * per-call cost, and no Deno readback (a CUDA engine's step ends when its kernels do).
 */
export function profiledCostModel(p: SimProfile): CostModel {
  const decode = (n: number) =>
    layerMs(p, Array.from({ length: n }, (_, slot) => ({ slot, pos: 511 })));
  const prefill = (n: number) =>
    layerMs(p, Array.from({ length: n }, (_, pos) => ({ slot: 0, pos })));
  const points: [number, number][] = [
    ...[1, 4, 16, 64].map((n): [number, number] => [n, decode(n)]),
    ...[256, 1024, 2048].map((n): [number, number] => [n, prefill(n)]),
  ];
  const r = ratesOf(p);
  const copy = { fixedMs: r.callMs, perUnitMs: 1 / r.linkBytesPerMs };
  const fit = sumsOf(points, 8);
  return {
    numLayers: p.model.layers,
    roundTripMs: 0,
    layer: lineOf(fit),
    sample: { fixedMs: headMs(p, 1), perUnitMs: (headMs(p, 64) - headMs(p, 1)) / 63 },
    hostToDevice: copy,
    deviceToHost: copy,
    prefetch: copy,
    overlap: 0,
    layerFit: fit,
  };
}
