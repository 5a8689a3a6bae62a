// The simulation's GPU profiles reproduce the cost figures their sources give (sim/gpu_profiles.ts
// says where each constant comes from): OrbitFlow's transfer-to-compute ratios, FastSwitch's swap
// times, the budgets the papers' setups leave, and the premise every paper rests on (decode bound
// by bytes, so a step of 32 rows costs little more than one; prefill bound by compute).

import { GpuEngine } from "../../sim/gpu_engine.ts";
import { GPUS, modelSizes, PROFILES } from "../../sim/gpu_profiles.ts";
import {
  attentionShare,
  blockBytes,
  copiesMs,
  gpuStepMs,
  layerMs,
} from "../../sim/gpu_step_cost.ts";
import type { KvCopy, StepPlan } from "../../engine/engine.ts";
import { fakeClock } from "../../sim/fake_clock.ts";
import { assert, assertEquals } from "../helpers/testing.ts";

const within = (actual: number, expected: number, share: number, what: string) =>
  assert(
    Math.abs(actual - expected) <= share * expected,
    `${what}: ${actual.toFixed(3)} is not within ${share * 100}% of ${expected}`,
  );

function decodePlan(rows: number, pos: number): StepPlan {
  return {
    rows: Array.from({ length: rows }, (_, slot) => ({ slot, pos, token: null })),
    samples: Array.from({ length: rows }, (_, row) => ({ row })),
    sampling: [],
    tables: [],
  } as unknown as StepPlan;
}

Deno.test("profiles: OrbitFlow Fig. 2b, one layer's KV transfer over its compute (A6000, batch 4)", () => {
  const a6000 = { ...PROFILES.orbitflow, gpu: GPUS.a6000 };
  const perToken = modelSizes(a6000.model).kvBytesPerTokenLayer;
  const ratio = (tokens: number) => {
    const rows = Array.from({ length: 4 }, (_, slot) => ({ slot, pos: tokens - 1 }));
    const transferMs = 4 * tokens * perToken / (a6000.gpu.linkGBs * 1e6);
    return transferMs / layerMs(a6000, rows);
  };
  within(ratio(2048), 1.9, 0.05, "at 2K tokens");
  within(ratio(16384), 6.1, 0.05, "at 16K tokens");
});

Deno.test("profiles: eLLM Fig. 10, a decode step over a full pool on Llama2-13B / A100 within vLLM-Recompute's mean TPOT (63.91 ms)", () => {
  const p = PROFILES.ellm;
  // The pool's ~60K tokens over 64 sequences: the batch vLLM runs with its KV full.
  const seqs = 64, ctx = Math.floor(p.kvTokens / seqs);
  const step = gpuStepMs(p, decodePlan(seqs, ctx - 1));
  assert(step < 63.91, `a full-pool decode step takes ${step.toFixed(1)} ms`);
  // Prefill stalls make up the rest of the TPOT: the step is not far below it either.
  assert(step > 0.6 * 63.91, `${step.toFixed(1)} ms leaves most of the TPOT unexplained`);
  // The batch-4 anchor (OrbitFlow Fig. 2b) holds: the share at 4 sequences is 0.29.
  within(attentionShare(p.efficiency, 4), 0.29, 1e-9, "attention share at 4 sequences");
});

Deno.test("profiles: FastSwitch Table 1, swap-out time per operation (LLaMA-8B, A10)", () => {
  const p = PROFILES.fastswitch;
  // One operation: a group of n contiguous blocks, copied out layer by layer.
  const operation = (n: number): KvCopy[] =>
    Array.from({ length: p.model.layers }, (_, layer) => ({
      direction: "out",
      layer,
      deviceBlocks: Array.from({ length: n }, (_, i) => 100 + i),
      hostBlocks: Array.from({ length: n }, (_, i) => 500 + i),
    }));
  assertEquals(blockBytes(p) * p.model.layers, 2 * 1024 ** 2, "a 16-token block is 2 MiB");
  // The table's averages, 9.3 and 5.43 blocks per operation, rounded to whole blocks.
  within(copiesMs(p, operation(9)), 15_500 / 13_076, 0.15, "vLLM-style, 9.3 blocks/op (ms)");
  within(copiesMs(p, operation(5)), 6_700 / 10_713, 0.3, "with reuse, 5.43 blocks/op (ms)");
});

Deno.test("profiles: asynchronous swaps (FastSwitch §3.3) take the longer of copies and kernels, not their sum", () => {
  const p = PROFILES.fastswitch;
  const copies: KvCopy[] = Array.from({ length: p.model.layers }, (_, layer) => ({
    direction: "out",
    layer,
    deviceBlocks: Array.from({ length: 40 }, (_, i) => 100 + i),
    hostBlocks: Array.from({ length: 40 }, (_, i) => 500 + i),
  }));
  const swap = copiesMs(p, copies);
  for (const rows of [1, 64]) {
    const bare = gpuStepMs(p, decodePlan(rows, 511));
    const plan = { ...decodePlan(rows, 511), copies };
    within(gpuStepMs(p, plan), bare + swap, 1e-9, `${rows} rows, synchronous`);
    const overhead = p.efficiency.stepOverheadMs;
    const longer = overhead + Math.max(bare - overhead, swap);
    within(gpuStepMs(p, plan, { async: true }), longer, 1e-9, `${rows} rows, asynchronous`);
  }
});

Deno.test("profiles: the KV budgets the papers' setups leave", () => {
  assertEquals(PROFILES.orbitflow.kvTokens, 16_384); // OrbitFlow's footnote: ~16K tokens
  within(PROFILES.fastswitch.kvTokens, 39_000, 0.1, "FastSwitch A10: 35–43K tokens");
  within(PROFILES.tokenflow.kvTokens, 40_000, 0.05, "TokenFlow 4090: ~40K tokens");
  within(PROFILES.layerkv.kvTokens, 55_000, 0.05, "LayerKV L20: ~55K tokens");
  within(PROFILES.ellm.kvTokens, 58_000, 0.05, "eLLM A100: 56–60K tokens");
});

Deno.test("profiles: decode is bound by bytes, prefill by compute", () => {
  for (const p of Object.values(PROFILES)) {
    const one = gpuStepMs(p, decodePlan(1, 255)), many = gpuStepMs(p, decodePlan(32, 255));
    assert(many < 2 * one, `${p.id}: 32 short decode rows ${many} ms, one ${one} ms`);
    const weights = modelSizes(p.model).weightBytes / (p.gpu.bandwidthGBs * 1e6);
    assert(one > weights, `${p.id}: a decode step reads every weight (${one} > ${weights} ms)`);
    const rows = Array.from({ length: 2048 }, (_, pos) => ({ slot: 0, pos }));
    const flops = 2 * modelSizes(p.model).layerParams * 2048;
    within(
      layerMs(p, rows),
      flops / (p.gpu.tflops * 1e9 * p.efficiency.compute),
      0.15,
      `${p.id}: a 2K prefill layer at its compute share`,
    );
  }
});

Deno.test("profiles: the GPU engine's steps take what the cost model says", async () => {
  const clock = fakeClock(0);
  try {
    const engine = new GpuEngine(PROFILES.tokenflow, { maxSlots: 4, maxContext: 64 });
    const plan = {
      rows: [{ slot: 0, pos: 0, token: 7 }],
      samples: [{ row: 0 }],
      sampling: [{ slot: 0, params: { temperature: 0, topP: 1, topK: 0, seed: 1 } }],
      tables: Array.from({ length: PROFILES.tokenflow.model.layers }, (_, layer) => ({
        layer,
        slot: 0,
        first: 0,
        blocks: [layer],
      })),
    } as unknown as StepPlan;
    // The fake clock counts whole ms; the engine carries the fractions from step to step.
    const expected = gpuStepMs(PROFILES.tokenflow, plan);
    let done = false;
    engine.step(plan).then(() => done = true);
    await clock.tickAsync(Math.floor(expected) - 1);
    assert(!done, "the step ended early");
    await clock.tickAsync(1);
    assert(done, "the step did not end on time");
  } finally {
    clock.uninstall();
  }
});

Deno.test("profiles: OrbitFlow's per-request prefetch streams hide a copy behind every layer since the request's own last", () => {
  // Request A offloads layers 1 and 20 into its part of the region (blocks 0–511), request B
  // layer 19 into its own (512–1023); each copy outlasts a layer's compute. Layer 1 waits for
  // its copy either way. Reusing the region as one, A's layer-20 copy may start only once layer
  // 19 has run, and layer 20 waits for it too; on A's own stream it starts after layer 1 and hides
  // behind the 18 layers between.
  const blocks = (from: number) => Array.from({ length: 512 }, (_, i) => from + i);
  const prefetch = [
    { layer: 1, deviceBlocks: blocks(0), hostBlocks: blocks(0) },
    { layer: 19, deviceBlocks: blocks(512), hostBlocks: blocks(512) },
    { layer: 20, deviceBlocks: blocks(0), hostBlocks: blocks(1024) },
  ];
  const plan = { ...decodePlan(2, 4095), prefetch } as StepPlan;
  const perRequest = PROFILES.orbitflow;
  assertEquals(perRequest.prefetchStart, "per-request");
  const region = { ...perRequest, prefetchStart: "region" as const };
  const copyMs = copiesMs(perRequest, [{ direction: "in", ...prefetch[0] }]);
  const layer = layerMs(perRequest, plan.rows);
  const base = gpuStepMs(perRequest, decodePlan(2, 4095));
  assert(copyMs > 2 * layer && 3 * copyMs < 18 * layer, `copy ${copyMs}, layer ${layer}`);
  within(gpuStepMs(perRequest, plan), base + copyMs - layer, 1e-9, "per-request streams");
  // One region: layer 20's copy starts as layer 19 ends, and all of it is stall.
  within(gpuStepMs(region, plan), base + copyMs - layer + copyMs, 1e-9, "one region");
});
