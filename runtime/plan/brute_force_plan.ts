// The planner's reference: tries every combination of candidate distances and keeps the fastest
// feasible one, by the same model and checks as the ILP (plan_terms.ts). Candidates^requests
// combinations, so small batches only: the tests hold the ILP to it.

import { evaluate, type PlanTerms } from "./plan_terms.ts";
import { type Choice, planBatch } from "./plan_batch.ts";
import type { Plan, PlanInput } from "./plan_types.ts";

export function bruteForcePlan(input: PlanInput): Plan {
  return planBatch(input, enumerate);
}

function enumerate(terms: PlanTerms): Choice {
  const n = terms.input.requests.length, c = terms.candidates;
  let best: number[] | undefined, bestMs = Infinity;
  const pick = new Array<number>(n).fill(0);
  for (;;) {
    const distances = pick.map((ci) => c[ci]);
    const e = evaluate(terms, distances);
    if (e.feasible && e.stepMs < bestMs) [best, bestMs] = [distances, e.stepMs];
    let i = 0;
    while (i < n && ++pick[i] === c.length) pick[i++] = 0;
    if (i === n) break;
  }
  return best ? { distances: best, status: "optimal" } : { status: "infeasible" };
}
