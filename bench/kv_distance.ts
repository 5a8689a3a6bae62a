// Decode step time against offload distance (OrbitFlow's executor), and what the cost model
// predicts for it. A batch of decode rows with long contexts runs at distance 0 (every layer on
// the device), then at distances that put every d-th layer's KV on the host: each step brings
// those layers' blocks into the prefetch region between layers' compute passes.
//
// The prediction is the distance-0 step time plus what the cost model the engine profiled at load
// says the step's prefetches cost (WebGPU's one queue: nothing overlaps), so the table shows
// whether the prefetch line holds when the copies sit between real layers.

import {
  type CostModel,
  Engine,
  type Gpu,
  type KvPrefetch,
  type StepPlan,
} from "../engine/engine.ts";
import { copyMs, type StepLoad } from "../engine/bench_api.ts";
import { offloadedLayers, prefetchLoad } from "../runtime/bench_api.ts";
import { smolShapedModelDir } from "./decode.ts";

const BATCH = 4;
const CONTEXT = 512;
const DISTANCES = [0, 8, 4, 2, 1];
/** Steps per timed run, and timed runs per distance (median). */
const STEPS = 8;
const RUNS = 5;

interface DistanceRow {
  distance: number;
  offloaded: number;
  prefetchMiB: number;
  measuredMs: number;
  predictedMs: number;
}

export async function benchOffloadDistance(gpu: Gpu): Promise<string> {
  const engine = await Engine.load({
    modelDir: await smolShapedModelDir(),
    gpu,
    gpuKvMb: 128,
    hostKvMb: 128,
    maxSlots: BATCH,
    maxRows: 64,
  });
  try {
    const info = engine.info;
    if (info.blocksPerArena.length !== 1) throw new Error("the bench assumes a one-arena pool");
    const B = info.blockSize;
    const blocks = CONTEXT / B; // full blocks of context per (request, layer)
    // Device blocks: per request and layer its own run, plus the tail block the new token goes
    // into; the region after them. Host blocks: per request and layer a run.
    const perSeq = blocks + 1;
    const regionStart = info.numLayers * BATCH * perSeq;
    const runs = DISTANCES.map((distance) => {
      const { plan, load } = decodePlan(info, distance, perSeq, regionStart, blocks);
      return { distance, plan, load, times: [] as number[] };
    });
    for (const r of runs) await engine.step(r.plan); // first use of these tables and tiles
    // Distances take turns within each repetition, so a change in the machine's load (other
    // processes on its cores) hits them alike.
    for (let rep = 0; rep < RUNS; rep++) {
      for (const r of runs) r.times.push(await timeSteps(engine, r.plan));
    }
    // The compute side is re-fitted to this run's speed: the distance-0 step time (the machine's
    // speed drifts between runs, and the load-time profile saw another moment). The copies are
    // the prefetch line profiled at load, untouched: what the table tests.
    const model = info.costModel!;
    const computeMs = median(runs[0].times);
    const rows: DistanceRow[] = runs.map((r) => ({
      distance: r.distance,
      offloaded: offloadedLayers(r.distance, info.numLayers).length,
      prefetchMiB: (r.load.bytesPrefetch ?? 0) / 2 ** 20,
      measuredMs: median(r.times),
      predictedMs: computeMs + copyMs(model, r.load),
    }));
    return report(gpu, engine, rows, model);
  } finally {
    await engine.close();
  }
}

/**
 * A decode step of BATCH rows at position CONTEXT. Device blocks: per request and layer its own
 * run of `perSeq` (context, then the tail block the new token goes into); the prefetch region
 * from `regionStart`. Host blocks: per request and layer a run of `blocks`.
 */
function decodePlan(
  info: Engine["info"],
  distance: number,
  perSeq: number,
  regionStart: number,
  blocks: number,
): { plan: StepPlan; load: StepLoad } {
  const offloaded = new Set(offloadedLayers(distance, info.numLayers));
  const tables = [], prefetch: KvPrefetch[] = [];
  for (let slot = 0; slot < BATCH; slot++) {
    for (let layer = 0; layer < info.numLayers; layer++) {
      const own = (layer * BATCH + slot) * perSeq;
      const table = Array.from({ length: perSeq }, (_, i) => own + i);
      if (offloaded.has(layer)) {
        const region = Array.from({ length: blocks }, (_, i) => regionStart + slot * blocks + i);
        table.splice(0, blocks, ...region);
        const host = (layer * BATCH + slot) * blocks;
        prefetch.push({
          layer,
          deviceBlocks: region,
          hostBlocks: Array.from({ length: blocks }, (_, i) => host + i),
        });
      }
      tables.push({ slot, layer, first: 0, blocks: table });
    }
  }
  const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
  const plan: StepPlan = {
    prefetch,
    tables,
    sampling: Array.from({ length: BATCH }, (_, slot) => ({ slot, params: greedy })),
    rows: Array.from({ length: BATCH }, (_, slot) => ({ slot, pos: CONTEXT, token: slot })),
    samples: Array.from({ length: BATCH }, (_, row) => ({ row })),
    wantTopLogprobs: false,
  };
  const load = { rows: BATCH, samples: BATCH, ...prefetchLoad(prefetch, info.kvBlockBytes) };
  return { plan, load };
}

/** Per-step queue time of STEPS steps of `plan`, two in flight, as the loop runs them. */
async function timeSteps(engine: Engine, plan: StepPlan): Promise<number> {
  const t0 = performance.now();
  const inflight: Promise<unknown>[] = [];
  for (let i = 0; i < STEPS; i++) {
    if (inflight.length >= 2) await inflight.shift();
    inflight.push(engine.step(i === 0 ? plan : { ...plan, tables: [], sampling: [] }));
  }
  await Promise.all(inflight);
  return (performance.now() - t0) / STEPS;
}

function report(gpu: Gpu, engine: Engine, rows: DistanceRow[], model: CostModel): string {
  const info = engine.info;
  const p = model.prefetch!;
  const lines = rows.map((r) => {
    const err = (r.predictedMs - r.measuredMs) / r.measuredMs;
    return `| ${r.distance || "none"} | ${r.offloaded} | ${r.prefetchMiB.toFixed(1)} | ${
      r.measuredMs.toFixed(1)
    } | ${r.predictedMs.toFixed(1)} | ${(err * 100).toFixed(1)}% |`;
  });
  return [
    `### Decode step time vs offload distance (${gpu.adapterName}, ${info.dtype}, SmolLM2-135M shape)`,
    "",
    `${BATCH} decode rows with ${CONTEXT} tokens of context each; distance d keeps every d-th of ` +
    `the ${info.numLayers} layers' KV on the host and brings it into the prefetch region just ` +
    `before the layer runs. Per-step time over ${STEPS} steps with two in flight, median of ` +
    `${RUNS}, the distances taking turns. Prediction: the distance-0 time plus the prefetches ` +
    `as the cost model profiled at load prices them (${p.fixedMs.toFixed(3)} ms per copy + ${
      (1 / p.perUnitMs / 1e6).toFixed(2)
    } GB/s; one queue, so no overlap).`,
    "",
    "| distance | layers on host | prefetched MiB/step | measured ms/step | predicted | error |",
    "|---|---|---|---|---|---|",
    ...lines,
  ].join("\n");
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}
