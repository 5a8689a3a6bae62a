// OrbitFlow's placement planner: one offload distance per request, chosen by an integer program
// solved with yalps. Minimizes the predicted step time within the device budget and a bound on
// SLO violations over the decode window (plan_terms.ts); the model is latency_model.ts's.
//
// The program (i: request, c: candidate distance, l: layer; b_i its blocks per layer and k_i the
// ms to prefetch one of its layers, both at the window's end; K_c the layers c offloads; comp one
// layer's compute; F = L·comp + tail, the step with nothing offloaded):
//
//   x[i][c] ∈ {0,1}, Σ_c x[i][c] = 1                     one distance per request
//   P ≥ Σ_{i,c: l ∈ K_c} b_i x[i][c]          for each l  the prefetch region: the busiest layer
//   Σ_{i,c} (L − |K_c|) b_i x[i][c] + P ≤ budget, P ≤ region cap
//     (with a region the pool reserved, R blocks: Σ ... + R ≤ budget instead, §3.3.1 Eq. 1's
//     buffer counted once, and P only bounded by the cap)
//   X_l = Σ_{i,c: l ∈ K_c} k_i x[i][c]                    copy time before layer l
//   e_l ≥ X_l − s·comp,  e_l ≥ (1 − s)·X_l,  e_l ≥ 0      what the copy adds to layer l
//   E ≥ Σ_l e_l                                            what copies add to the step, T = F + E
//   v_i ≥ (W / interval_i)·(F + E) − W − buffered_i, v_i ≥ 0     late tokens of request i
//   Σ_i v_i ≤ α·W
//   minimize E
//
// Why it is exact: a layer's time comp + X − s·min(comp, X) is comp plus the largest of the three
// lines above (a max of linear terms), and the step is their sum; P is the max over layers. E, e_l
// and P only ever help by being smaller (they are the objective, or sit on the "needed" side of a
// bound), so at the optimum each equals its max and F + E is the model's step time. With s = 0
// (one queue, as here) e_l = X_l, so E is folded straight into the x terms. The objective is the
// added time rather than the whole step so that yalps' tolerance, when set, is relative to what
// the choice of distances changes.
//
// Solving: yalps solves the LP relaxation first; its optimum bounds every plan's step time from
// below. A plan rounded from it (lp_rounding.ts) within `optimalityGap` of that bound is returned
// at once; otherwise yalps' branch and bound runs, with the same gap as its tolerance, for what is
// left of the time limit, and the better of its answer and the rounded plan wins. With gap 0 the
// answer is the exact optimum (the tests hold it to brute force).
//
// The x are declared integer, not binary: Σ_c x[i][c] = 1 and x ≥ 0 already bound them by 1,
// and yalps would add one more row per binary to its tableau.

import { solve } from "yalps";
import type { Coefficients, Constraint, Model } from "yalps";
import { offloadedCount, offloadedLayers } from "../kv/offload_pattern.ts";
import { layerComputeMs, tailMs } from "./latency_model.ts";
import { evaluate, type PlanTerms } from "./plan_terms.ts";
import { roundLp } from "./lp_rounding.ts";
import { uniformChoice } from "./uniform_plan.ts";
import { type Choice, planBatch } from "./plan_batch.ts";
import type { Plan, PlanInput } from "./plan_types.ts";

/**
 * yalps' zero and integrality threshold. Its default (1e-8) let branch and bound prune the optimum
 * in rare random cases (2 in 18,000 small batches); 1e-6 matched brute force on all of them.
 */
const PRECISION = 1e-6;
/** yalps' precision for a second try when the first calls a batch infeasible. */
const RETRY_PRECISION = 1e-5;

/**
 * Default optimalityGap: a plan within 0.5% of the best possible step time is good enough; the cost
 * model it is measured with is itself accurate to 15–20% (docs/benchmarks/kv-memory.md).
 */
export const DEFAULT_GAP = 5e-3;

/**
 * Plans `input` with the integer program (OrbitFlow's planner), or with one distance for the whole
 * batch when it asks for that (the ablation's baseline).
 */
export function orbitPlan(input: PlanInput): Plan {
  return planBatch(input, input.batchUniform ? uniformChoice : solveIlp);
}

/** The integer program of the header, built for yalps. */
export function ilpModel(terms: PlanTerms): Model {
  const { input, candidates, endBlocks, copyMs, intervalMs } = terms;
  const L = input.numLayers, W = input.window, s = input.costs.overlap;
  const comp = layerComputeMs(input.costs, terms.shape);
  const floor = L * comp + tailMs(input.costs, terms.shape);
  const constraints = new Map<string, Constraint>();
  const variables = new Map<string, Coefficients>();
  const usedLayers = new Set(candidates.flatMap((c) => offloadedLayers(c, L)));
  // No bound on late tokens (PlanInput.serveAll's second try): no SLO rows at all.
  const bounded = Number.isFinite(terms.maxViolations);

  // A region the pool reserved is the budget's buffer term, counted once (plan_terms.ts); else P is.
  const reserved = input.regionReservedBlocks;
  constraints.set("mem", { max: input.budgetBlocks - (reserved ?? 0) });
  constraints.set("E", { min: 0 });
  for (const l of usedLayers) {
    constraints.set(`buf${l}`, { max: 0 });
    if (s > 0) {
      constraints.set(`a${l}`, { min: -s * comp });
      constraints.set(`b${l}`, { min: 0 });
    }
  }

  input.requests.forEach((r, i) => {
    constraints.set(`one${i}`, { equal: 1 });
    candidates.forEach((c, ci) => {
      const k = offloadedCount(c, L);
      const coef = new Map<string, number>([[`one${i}`, 1], ["mem", (L - k) * endBlocks[i]]]);
      for (const l of offloadedLayers(c, L)) {
        coef.set(`buf${l}`, endBlocks[i]);
        if (s > 0) {
          coef.set(`a${l}`, -copyMs[i]);
          if (s < 1) coef.set(`b${l}`, -(1 - s) * copyMs[i]);
        }
      }
      if (s === 0 && k > 0) coef.set("E", -k * copyMs[i]);
      variables.set(`x${i}_${ci}`, coef);
    });
    const interval = intervalMs[i];
    if (interval !== undefined && bounded) {
      constraints.set(`slo${i}`, { min: (W / interval) * floor - W - r.bufferedTokens });
      variables.set(`v${i}`, { [`slo${i}`]: 1, viol: 1 });
    }
  });
  if (bounded) constraints.set("viol", { max: terms.maxViolations });

  // P: the prefetch region.
  const p = new Map<string, number>(reserved === undefined ? [["mem", 1]] : []);
  for (const l of usedLayers) p.set(`buf${l}`, -1);
  if (Number.isFinite(input.prefetchRegionBlocks)) {
    constraints.set("region", { max: input.prefetchRegionBlocks });
    p.set("region", 1);
  }
  variables.set("P", p);
  // E: the objective, the ms copies add to the step.
  const e = new Map<string, number>([["ms", 1], ["E", 1]]);
  input.requests.forEach((_, i) => {
    const interval = intervalMs[i];
    if (interval !== undefined && bounded) e.set(`slo${i}`, -W / interval);
  });
  variables.set("E", e);
  if (s > 0) {
    for (const l of usedLayers) variables.set(`e${l}`, { E: -1, [`a${l}`]: 1, [`b${l}`]: 1 });
  }

  const integers = [...variables.keys()].filter((k) => k.startsWith("x"));
  return { direction: "minimize", objective: "ms", constraints, variables, integers };
}

function solveIlp(terms: PlanTerms): Choice {
  const t0 = performance.now();
  const model = ilpModel(terms);
  const gap = terms.input.optimalityGap ?? DEFAULT_GAP;
  const relaxed = solve({ ...model, integers: false }, { precision: PRECISION });
  if (relaxed.status === "infeasible") return { status: "infeasible" };
  if (relaxed.status !== "optimal") return { status: "no-plan-in-time" };

  // The relaxation bounds every plan's step from below: a rounded plan close enough to it is
  // returned without branching.
  const comp = layerComputeMs(terms.input.costs, terms.shape);
  const bound = terms.input.numLayers * comp + tailMs(terms.input.costs, terms.shape) +
    relaxed.result;
  const rounded = roundLp(terms, weightsOf(terms, relaxed.variables));
  if (rounded && rounded.stepMs <= bound * (1 + gap) + 1e-9 * bound) {
    const tight = rounded.stepMs <= bound * (1 + 1e-9);
    return { distances: rounded.distances, status: tight ? "optimal" : "within-gap" };
  }

  const timeout = Math.max(0, terms.input.timeoutMs - (performance.now() - t0));
  // yalps' tolerance is relative to its objective (E, the added time), the gap to the whole step.
  const tolerance = relaxed.result > 0 ? Math.min(1, (gap * bound) / relaxed.result) : 0;
  let solution = solve(model, { timeout, precision: PRECISION, tolerance });
  if (solution.status === "infeasible") {
    // yalps' branch and bound can call a batch infeasible from rounding alone (seen: a plan that
    // brute force finds, declared infeasible at precision 1e-6 and solved at 1e-5). Its answer at
    // a looser precision is checked by evaluate() below like any other.
    const left = Math.max(0, terms.input.timeoutMs - (performance.now() - t0));
    solution = solve(model, { timeout: left, precision: RETRY_PRECISION, tolerance });
  }
  const found = solution.status === "optimal" ||
    (solution.status === "timedout" && Number.isFinite(solution.result));
  let best = rounded;
  if (found) {
    const distances = distancesOf(terms, weightsOf(terms, solution.variables));
    const e = evaluate(terms, distances);
    if (e.feasible && (!best || e.stepMs < best.stepMs)) best = { distances, stepMs: e.stepMs };
  }
  if (!best) {
    // "cycled" (or "unbounded", which this model cannot be) is no answer either: keep the last plan.
    return { status: solution.status === "infeasible" ? "infeasible" : "no-plan-in-time" };
  }
  const proved = solution.status === "optimal";
  const status = !proved ? "timedout" : tolerance > 0 ? "within-gap" : "optimal";
  return { distances: best.distances, status };
}

/** x[i][ci] from a solution's variables. */
function weightsOf(terms: PlanTerms, vars: [string, number][]): number[][] {
  const w = terms.input.requests.map(() => terms.candidates.map(() => 0));
  for (const [name, value] of vars) {
    if (!name.startsWith("x")) continue;
    const [i, ci] = name.slice(1).split("_").map(Number);
    w[i][ci] = value;
  }
  return w;
}

/** Each request's heaviest candidate. */
function distancesOf(terms: PlanTerms, weights: number[][]): number[] {
  return weights.map((w) => terms.candidates[w.indexOf(Math.max(...w))]);
}
