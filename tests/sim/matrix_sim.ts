// The workload matrix in fake time: every cell of bench/matrix/cells.ts replayed through the real
// Runtime (scheduler, policies, pools, host tier) over the fake engine, whose steps take what a
// linear cost model says of their rows. The client side is the bench's own: tokens reach the
// reader as the runtime's pacer releases them, and the bench's metrics judge them. It runs a cell
// in seconds with nothing else competing for the cores, so a policy can be compared across the
// whole matrix while it is being changed; the figures that count are still the real matrix's
// (`deno task bench matrix`), which runs the adapter and HTTP this leaves out.
//
//   deno run -A tests/sim/matrix_sim.ts [cell ids...]

import { type CostModel, type StepPlan } from "../../engine/engine.ts";
import {
  applyOverrides,
  type Cell,
  CELLS,
  cellWorkload,
  selectCells,
} from "../../bench/matrix/cells.ts";
import { type RunSummary, summarize } from "../../bench/serve/metrics.ts";
import { displayTimes } from "../../bench/serve/playout.ts";
import { seededRandom } from "../../bench/serve/random.ts";
import type { RequestRecord } from "../../bench/serve/record.ts";
import type { WorkloadRequest } from "../../bench/serve/workload.ts";
import { InlinePlanner } from "../../runtime/plan/inline_planner.ts";
import { Runtime } from "../../runtime/service.ts";
import type { RuntimeOptions } from "../../runtime/options.ts";
import type { RuntimeStats } from "../../runtime/stats.ts";
import { costModelWithLayer } from "../helpers/cost_models.ts";
import { FakeEngine } from "../helpers/fake_engine.ts";
import { useFakeTime } from "../helpers/testing.ts";

/** What a step costs in the simulation, in ms: the demo model on the 2-core development machine,
 * roughly (decode rows dominated by the per-sample head and readback, prefill rows cheaper). */
export interface SimCosts {
  fixedMs: number;
  perRowMs: number;
  perSampleMs: number;
  /** Per row, per thousand positions it attends to (attention grows with the context). */
  perRowKiloPosMs: number;
  /** Per KV block copied between tiers (one block, all layers). */
  perBlockCopyMs: number;
}

export const DEMO_COSTS: SimCosts = {
  fixedMs: 8,
  perRowMs: 3,
  perSampleMs: 3,
  perRowKiloPosMs: 4,
  perBlockCopyMs: 0.01,
};

/** The demo model's KV geometry: 16-token blocks, 4 layers sharing one arena. */
const BLOCK_SIZE = 16;
const LAYERS = 4;
/** Device blocks (all layers) per budget, as `--gpu-kv-mb 2` and 64 give on the demo model. */
export const BUDGET_BLOCKS = { tight: 496, ample: 15_872 };

function costModelOf(c: SimCosts): CostModel {
  const copy = { fixedMs: 0, perUnitMs: c.perBlockCopyMs / LAYERS / KV_BLOCK_BYTES };
  return costModelWithLayer(c.fixedMs / LAYERS, c.perRowMs / LAYERS, {
    numLayers: LAYERS,
    roundTripMs: 0,
    sample: { fixedMs: 0, perUnitMs: c.perSampleMs },
    hostToDevice: copy,
    deviceToHost: copy,
  });
}

const KV_BLOCK_BYTES = 4096;

/** A fake engine whose steps take the simulated cost of their plan. */
class SimEngine extends FakeEngine {
  private plan: StepPlan | null = null;
  constructor(blocks: number, hostBlocks: number, costs: SimCosts) {
    super(
      {
        numLayers: LAYERS,
        blockSize: BLOCK_SIZE,
        blocksPerArena: [blocks],
        maxSlots: 32,
        maxRows: 128,
        maxBlocksPerSeq: 128,
        ringSize: 1,
        hostBlocks,
        costModel: costModelOf(costs),
        kvBlockBytes: KV_BLOCK_BYTES,
        vocabSize: 512,
      },
      () => new Promise((r) => setTimeout(r, this.stepCost(costs))),
    );
  }
  override step(plan: StepPlan) {
    this.plan = plan;
    return super.step(plan);
  }
  private stepCost(c: SimCosts): number {
    const p = this.plan!;
    const blocks = (p.copies ?? []).reduce((s, x) => s + x.deviceBlocks.length, 0) +
      (p.prefetch ?? []).reduce((s, x) => s + x.deviceBlocks.length, 0);
    const attention = p.rows.reduce((s, r) => s + r.pos, 0) / 1000 * c.perRowKiloPosMs;
    return c.fixedMs + attention + c.perRowMs * p.rows.length + c.perSampleMs * p.samples.length +
      c.perBlockCopyMs * blocks / LAYERS;
  }
}

/** A configuration: its name and the runtime options its flags stand for. */
export interface SimConfig {
  name: string;
  options: Omit<RuntimeOptions, "maxQueue" | "maxTokensLimit" | "eosIds">;
  hostBlocks: number;
}

export const FCFS_VLLM: SimConfig = {
  name: "fcfs-vllm",
  options: {
    policy: "fcfs",
    priority: false,
    prefixCache: true,
    preempt: "recompute",
    writeThrough: false,
  },
  hostBlocks: 0,
};

/** The server's defaults (main.ts), with its 256 MB host tier (far more than any cell uses). */
export const DEFAULT: SimConfig = {
  name: "default",
  options: {
    policy: "tokenflow",
    prefixCache: true,
    recompute: "auto",
    writeThrough: true,
    swapReuse: true,
  },
  hostBlocks: 65_536,
};

function promptIds(w: WorkloadRequest): number[] {
  if (w.promptIds) return w.promptIds;
  const rand = seededRandom(w.promptSeed ?? w.id);
  return Array.from({ length: w.promptLen ?? 1 }, () => 1 + Math.floor(rand() * 500));
}

/** Replays `workload` through a runtime made of `config` in fake time: the clients' records, and
 * the runtime's counters at the end. */
export async function simulate(
  workload: readonly WorkloadRequest[],
  budgetBlocks: number,
  config: SimConfig,
  costs: SimCosts = DEMO_COSTS,
  timeoutMs = 300_000,
): Promise<{ records: RequestRecord[]; stats: RuntimeStats }> {
  const clock = useFakeTime(0);
  try {
    const engine = new SimEngine(budgetBlocks, config.hostBlocks, costs);
    // OrbitFlow's planner solves inline: its Worker runs on the wall clock, which fake time
    // outruns, so its plans would land at steps that differ from run to run.
    const rt = new Runtime(engine, {
      ...config.options,
      maxQueue: 1000,
      maxTokensLimit: 4096,
      eosIds: [],
    }, { planSource: new InlinePlanner() });
    const records: RequestRecord[] = [];
    const done: Promise<void>[] = [];
    const t0 = Date.now();
    for (const w of [...workload].sort((a, b) => a.arrivalS - b.arrivalS)) {
      const wait = t0 + w.arrivalS * 1000 - Date.now();
      if (wait > 0) await clock.tickAsync(wait);
      const sent = Date.now() - t0;
      const arrivals: number[] = [];
      const abort = new AbortController();
      const h = rt.submit({
        ids: promptIds(w),
        maxTokens: w.outputLen,
        sampling: { temperature: 0, topP: 1, topK: 0, seed: w.id },
        readingRate: w.readingRate >= 1000 ? 0 : w.readingRate,
        slo: { ttftMs: w.sloTtftMs, tbtMs: w.sloTbtMs },
        stopIds: [],
        signal: abort.signal,
      });
      const timer = setTimeout(() => abort.abort(), timeoutMs);
      done.push((async () => {
        let outcome: RequestRecord["outcome"] = "ok";
        try {
          for await (const _ of h.tokens) arrivals.push(Date.now() - t0 - sent);
          await h.done;
        } catch {
          outcome = abort.signal.aborted ? "timeout" : "failed";
        }
        clearTimeout(timer);
        records.push({
          id: w.id,
          outcome,
          sentAtMs: sent,
          endAtMs: Date.now() - t0,
          arrivalsMs: arrivals,
          displayMs: displayTimes(arrivals, w.readingRate),
          readingRate: w.readingRate,
          sloTtftMs: w.sloTtftMs,
          sloTbtMs: w.sloTbtMs,
          maxTokens: w.outputLen,
        });
      })());
    }
    let settled = false;
    Promise.all(done).then(() => settled = true);
    while (!settled) await clock.tickAsync(100);
    const stats = rt.stats();
    await rt.close();
    return { records: records.sort((a, b) => a.id - b.id), stats };
  } finally {
    clock.uninstall();
  }
}

export interface CellResult {
  cell: Cell;
  summaries: Map<string, RunSummary & { preemptions: number }>;
}

export async function simulateCell(c: Cell, configs: readonly SimConfig[]): Promise<CellResult> {
  const blocks = BUDGET_BLOCKS[c.budget];
  const maxContext = Math.min(2048, Math.floor(blocks / LAYERS) * BLOCK_SIZE);
  const workload = cellWorkload(applyOverrides(c, {}), maxContext);
  const summaries: CellResult["summaries"] = new Map();
  for (const config of configs) {
    const { records, stats } = await simulate(workload, blocks, config);
    summaries.set(config.name, { ...summarize(records), preemptions: stats.preemptions });
  }
  return { cell: c, summaries };
}

const fmt = (x: number | null, d = 2) => (x === null ? "-" : x.toFixed(d));
const ratio = (a: number | null, b: number | null) =>
  a === null || b === null ? "-" : b === 0 ? (a === 0 ? "1.00" : "inf") : (a / b).toFixed(2);

if (import.meta.main) {
  const ids = Deno.args.length ? Deno.args : undefined;
  const configs = [FCFS_VLLM, DEFAULT];
  console.log(
    "cell | ttft p99 (b, d, ×) | goodput (b, d) | stall s (b, d, ×) | raw (×) | preempt (b, d)",
  );
  for (const c of selectCells(ids, CELLS)) {
    const r = await simulateCell(c, configs);
    const b = r.summaries.get(FCFS_VLLM.name)!, d = r.summaries.get(DEFAULT.name)!;
    console.log(
      `${c.id} | ${fmt(b.ttftMs.p99! / 1000)} ${fmt(d.ttftMs.p99! / 1000)} ${
        ratio(d.ttftMs.p99, b.ttftMs.p99)
      }` +
        ` | ${fmt(b.sloGoodput)} ${fmt(d.sloGoodput)} | ${fmt(b.stallTotalS, 1)} ${
          fmt(d.stallTotalS, 1)
        } ${ratio(d.stallTotalS, b.stallTotalS)} | ${
          ratio(d.rawTokensPerS, b.rawTokensPerS)
        } | ${b.preemptions} ${d.preemptions}`,
    );
  }
}
