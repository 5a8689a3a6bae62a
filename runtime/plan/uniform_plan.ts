// The ablation baseline of OrbitFlow's Fig. 14a, "Batch-Uniform": one offload distance for every
// request of the batch (as FlexGen+ and SLO-aware offloading re-plan it at batch changes), the
// fastest that fits the budget and the SLO bound, by the same model and checks as the per-request
// ILP (plan_terms.ts). Candidates are few (9 for 32 layers), so every one is tried.

import { evaluate, type PlanTerms } from "./plan_terms.ts";
import type { Choice } from "./plan_batch.ts";

export function uniformChoice(terms: PlanTerms): Choice {
  const n = terms.input.requests.length;
  let best: number[] | undefined, bestMs = Infinity;
  for (const d of terms.candidates) {
    const distances = new Array<number>(n).fill(d);
    const e = evaluate(terms, distances);
    if (e.feasible && e.stepMs < bestMs) [best, bestMs] = [distances, e.stepMs];
  }
  return best ? { distances: best, status: "optimal" } : { status: "infeasible" };
}
