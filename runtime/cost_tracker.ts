// Keeps the engine's cost model true to what steps really take: the model profiled at load is
// re-fitted from every delivered step's measured time (the planner of the policies reads it):
// a step whose KV copies are a measurable part of it re-fits the copy bandwidths (OrbitFlow §3.4),
// any other the layer line, so that no step's error is counted against both.
// Pure bookkeeping over plain data; the fitting itself is engine/kv/cost_model.ts.

import type { CostModel, KvPrefetch } from "../engine/engine.ts";
import {
  copiesMeasurable,
  observeCopies,
  observeStep,
  predictStepMs,
  type StepLoad,
} from "../engine/kv/cost_model.ts";
import type { BuiltStep } from "./step_builder.ts";

export class CostTracker {
  /** Steps observed since load. */
  observed = 0;
  /** Mean |predicted − measured| / measured over the steps observed, for reports. */
  private errorSum = 0;

  constructor(private model: CostModel | undefined, private readonly kvBlockBytes: number) {}

  /** The current model (undefined when the engine was loaded without profiling). */
  get current(): CostModel | undefined {
    return this.model;
  }

  get meanRelativeError(): number {
    return this.observed ? this.errorSum / this.observed : 0;
  }

  /** What `step` asked of the GPU, in the cost model's terms. */
  loadOf(step: BuiltStep): StepLoad {
    // Copies out after a layer (layer-wise prefill) cost what the step's other copies out do.
    const copies = [...step.plan.copies ?? [], ...step.plan.copiesAfterLayer ?? []];
    const blocks = (dir: "in" | "out") =>
      copies.filter((c) => c.direction === dir).reduce((n, c) => n + c.deviceBlocks.length, 0);
    return {
      rows: step.plan.rows.length,
      samples: step.plan.samples.length,
      bytesIn: blocks("in") * this.kvBlockBytes,
      bytesOut: blocks("out") * this.kvBlockBytes,
      copiesIn: 2 * copies.filter((c) => c.direction === "in").length,
      copiesOut: 2 * copies.filter((c) => c.direction === "out").length,
      ...prefetchLoad(step.plan.prefetch ?? [], this.kvBlockBytes),
    };
  }

  /** Folds one delivered step's measured time (ms) into the model. */
  observe(step: BuiltStep, ms: number): void {
    if (!this.model || step.plan.rows.length === 0) return;
    const load = this.loadOf(step);
    const predicted = predictStepMs(this.model, load);
    this.errorSum += Math.abs(predicted - ms) / Math.max(ms, 1e-3);
    this.observed++;
    this.model = copiesMeasurable(this.model, load)
      ? observeCopies(this.model, load, ms)
      : observeStep(this.model, load, ms);
  }
}

/**
 * The prefetch part of a step's load: its bytes, and its copies counted as the engine makes them
 * (runs of consecutive blocks on both sides, K and V each).
 */
export function prefetchLoad(
  prefetch: readonly KvPrefetch[],
  kvBlockBytes: number,
): { bytesPrefetch: number; copiesPrefetch: number } {
  let blocks = 0, runs = 0;
  for (const p of prefetch) {
    blocks += p.deviceBlocks.length;
    p.deviceBlocks.forEach((d, i) => {
      const continues = i > 0 && d === p.deviceBlocks[i - 1] + 1 &&
        p.hostBlocks[i] === p.hostBlocks[i - 1] + 1;
      if (!continues) runs++;
    });
  }
  return { bytesPrefetch: blocks * kvBlockBytes, copiesPrefetch: 2 * runs };
}
