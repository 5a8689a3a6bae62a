// The demo model's step costs on this machine (2 cores, lavapipe), roughly, as the fake-time
// matrix (tests/sim/matrix_sim.ts) replays them, and its KV geometry and budgets: what the GPU
// matrix (sim/papers/matrix.ts) scales each cell from.

import type { StepPlan } from "../engine/engine.ts";

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
export const BLOCK_SIZE = 16;
export const LAYERS = 4;
/** Device blocks (all layers) per budget, as `--gpu-kv-mb 2` and 64 give on the demo model. */
export const BUDGET_BLOCKS = { tight: 496, ample: 15_872 };

/** What `p` takes at the costs `c`, ms. */
export function demoStepMs(
  c: SimCosts,
  p: Pick<StepPlan, "rows" | "samples" | "copies" | "prefetch">,
): number {
  const blocks = (p.copies ?? []).reduce((s, x) => s + x.deviceBlocks.length, 0) +
    (p.prefetch ?? []).reduce((s, x) => s + x.deviceBlocks.length, 0);
  const attention = p.rows.reduce((s, r) => s + r.pos, 0) / 1000 * c.perRowKiloPosMs;
  return c.fixedMs + attention + c.perRowMs * p.rows.length + c.perSampleMs * p.samples.length +
    c.perBlockCopyMs * blocks / LAYERS;
}

/** The engine's limits at the demo model, as the capacity estimate reads them. */
export const DEMO_LIMITS = { maxSlots: 32, maxRows: 128, blockSize: BLOCK_SIZE, layers: LAYERS };
