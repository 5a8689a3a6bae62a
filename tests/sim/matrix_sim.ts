// The workload matrix in fake time: every cell of bench/matrix/cells.ts replayed through the real
// Runtime (scheduler, policies, pools, host tier) over the fake engine, whose steps take what a
// linear cost model says of their rows. The client side is the bench's own: tokens reach the
// reader as the runtime's pacer releases them, and the bench's metrics judge them. It runs a cell
// in seconds with nothing else competing for the cores, so a policy can be compared across the
// whole matrix while it is being changed; the figures that count are still the real matrix's
// (`deno task bench matrix`), which runs the adapter and HTTP this leaves out.
//
//   deno run -A tests/sim/matrix_sim.ts [--variants hold,behind,...] [cell ids...]
//
// --variants adds candidate defaults (sim/matrix_configs.ts), each printed on its own line under
// the default's.

import { type CostModel, type StepPlan } from "../../engine/engine.ts";
import {
  applyOverrides,
  type Cell,
  CELLS,
  cellWorkload,
  selectCells,
} from "../../bench/matrix/cells.ts";
import { type RunSummary, summarize } from "../../bench/serve/metrics.ts";
import type { RequestRecord } from "../../bench/serve/record.ts";
import type { WorkloadRequest } from "../../bench/serve/workload.ts";
import type { RuntimeStats } from "../../runtime/service.ts";
import { costModelWithLayer } from "../helpers/cost_models.ts";
import { FakeEngine } from "../../sim/fake_engine.ts";
import { replay, type SimClients, type SimConfig } from "../../sim/replay.ts";
import { fcfsVllm, sluiceDefault, variantOf } from "../../sim/matrix_configs.ts";
import {
  BLOCK_SIZE,
  BUDGET_BLOCKS,
  DEMO_COSTS,
  DEMO_LIMITS,
  demoStepMs,
  LAYERS,
  type SimCosts,
} from "../../sim/demo_costs.ts";

export { BUDGET_BLOCKS, DEMO_COSTS, DEMO_LIMITS, demoStepMs, type SimCosts };

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
    return demoStepMs(c, this.plan!);
  }
}

export const FCFS_VLLM: SimConfig = fcfsVllm();

/** The server's defaults (main.ts), with its 256 MB host tier (far more than any cell uses). */
export const DEFAULT: SimConfig = sluiceDefault(65_536);

/**
 * Replays `workload` through a runtime made of `config` over the demo model's costs, in fake time
 * (sim/replay.ts says what is simulated and what the counters mean).
 */
export function simulate(
  workload: readonly WorkloadRequest[],
  budgetBlocks: number,
  config: SimConfig,
  costs: SimCosts = DEMO_COSTS,
  clients: SimClients = {},
): Promise<{ records: RequestRecord[]; stats: RuntimeStats }> {
  return replay(
    workload,
    () => new SimEngine(budgetBlocks, config.hostBlocks, costs),
    config,
    clients,
  );
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
  const args = [...Deno.args];
  const at = args.indexOf("--variants");
  const variants = at < 0 ? [] : args.splice(at, 2)[1].split(",").filter((v) => v);
  const ids = args.length ? args : undefined;
  const others = [DEFAULT, ...variants.map((v) => variantOf(DEFAULT, v))];
  console.log(
    "cell | ttft p99 (b, d, ×) | goodput (b, d) | stall s (b, d, ×) | raw (×) | preempt (b, d)",
  );
  for (const c of selectCells(ids, CELLS)) {
    const r = await simulateCell(c, [FCFS_VLLM, ...others]);
    const b = r.summaries.get(FCFS_VLLM.name)!;
    for (const config of others) {
      const d = r.summaries.get(config.name)!;
      const id = config === DEFAULT ? c.id : `  ${config.name}`;
      console.log(
        `${id} | ${fmt(b.ttftMs.p99! / 1000)} ${fmt(d.ttftMs.p99! / 1000)} ${
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
}
