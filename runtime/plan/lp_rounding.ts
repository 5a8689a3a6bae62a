// A quick integer plan from the ILP's LP relaxation, to stop branch and bound early. The relaxed
// optimum of this program has few fractional requests (a basic solution splits only as many as
// there are coupling rows that bind, usually one or two). Keep every whole choice, try each
// combination of the split requests' candidates (those the LP used, plus one more offloading step
// for memory), keep the fastest feasible combination by the exact check, then polish it: move one
// request at a time to another distance while that makes the step faster (rounding one request
// up frees memory another can use to offload less).

import { offloadedCount } from "../kv/offload_pattern.ts";
import { evaluate, type PlanTerms } from "./plan_terms.ts";

/** Combinations tried at most; past it, each split request takes its heaviest LP choice. */
const MAX_COMBINATIONS = 4096;
/** Polishing passes over every request at most. */
const MAX_PASSES = 4;

/**
 * @param weights weights[i][ci]: the LP's x[i][ci]
 * @returns distances (one per request) and the step they predict, or undefined if none fit
 */
export function roundLp(
  terms: PlanTerms,
  weights: number[][],
): { distances: number[]; stepMs: number } | undefined {
  const { candidates } = terms;
  const L = terms.input.numLayers;
  const options = weights.map((w) => {
    const used = w.map((x, ci) => [x, ci]).filter(([x]) => x > 1e-6).sort((a, b) => b[0] - a[0])
      .map(([, ci]) => ci);
    if (used.length <= 1) return used.length ? used : [0];
    // One more step of offloading than the most the LP used, in case rounding up overflows memory.
    const most = Math.max(...used.map((ci) => offloadedCount(candidates[ci], L)));
    const further = candidates
      .map((c, ci) => [offloadedCount(c, L), ci])
      .filter(([k]) => k > most)
      .sort((a, b) => a[0] - b[0])[0];
    return further ? [...used, further[1]] : used;
  });
  let combos = options.reduce((n, o) => n * o.length, 1);
  if (combos > MAX_COMBINATIONS) {
    options.forEach((o, i) => (options[i] = [o[0]]));
    combos = 1;
  }
  let best: { distances: number[]; stepMs: number } | undefined;
  const pick = options.map(() => 0);
  for (let n = 0; n < combos; n++) {
    const distances = pick.map((p, i) => candidates[options[i][p]]);
    const e = evaluate(terms, distances);
    if (e.feasible && (!best || e.stepMs < best.stepMs)) best = { distances, stepMs: e.stepMs };
    for (let i = 0; i < pick.length && ++pick[i] === options[i].length; i++) pick[i] = 0;
  }
  return best && polish(terms, best);
}

/** Single-request moves that make the step faster, until none does. */
function polish(
  terms: PlanTerms,
  start: { distances: number[]; stepMs: number },
): { distances: number[]; stepMs: number } {
  const best = { distances: [...start.distances], stepMs: start.stepMs };
  for (let pass = 0; pass < MAX_PASSES; pass++) {
    let improved = false;
    for (let i = 0; i < best.distances.length; i++) {
      const was = best.distances[i];
      for (const c of terms.candidates) {
        if (c === was) continue;
        best.distances[i] = c;
        const e = evaluate(terms, best.distances);
        if (e.feasible && e.stepMs < best.stepMs - 1e-12) {
          best.stepMs = e.stepMs;
          improved = true;
          break;
        }
        best.distances[i] = was;
      }
    }
    if (!improved) break;
  }
  return best;
}
