// Random planner inputs for tests and the bench: batches whose budgets, SLOs and buffers land near
// the edges where choosing distances matters (some fit whole, some need offloading, some nothing).

import type { PlanCosts } from "../../../runtime/plan/latency_model.ts";
import type { PlanInput, PlanRequest } from "../../../runtime/plan/plan_types.ts";

export interface RandomShape {
  requests: [number, number];
  layers: [number, number];
  /** Overlap shares to draw from (default [0]). */
  overlaps?: number[];
}

const BLOCK_TOKENS = 16, BLOCK_BYTES = 1000;

export function randomInput(next: () => number, shape: RandomShape): PlanInput {
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const pickOf = <T>(xs: readonly T[]) => xs[Math.floor(next() * xs.length)];
  const numLayers = int(...shape.layers);
  const n = int(...shape.requests);
  const window = pickOf([1, 8, 32, 64]);
  const costs: PlanCosts = {
    layer: { fixedMs: 1 + next() * 20, perUnitMs: next() * 2 },
    sample: { fixedMs: next() * 5, perUnitMs: next() * 0.5 },
    // 0.05–5 ms per block (of BLOCK_BYTES bytes) plus a small cost per copy.
    hostToDevice: { fixedMs: next() * 0.1, perUnitMs: (0.05 + next() * 5) / BLOCK_BYTES },
    overlap: pickOf(shape.overlaps ?? [0]),
  };
  const requests: PlanRequest[] = [];
  let allBlocks = 0;
  for (let id = 0; id < n; id++) {
    const tokens = int(1, 400);
    const blocksPerLayer = Math.ceil(tokens / BLOCK_TOKENS);
    allBlocks += blocksPerLayer * numLayers;
    requests.push({ id: 100 + id, tokens, blocksPerLayer, bufferedTokens: int(0, 2 * window) });
  }
  // SLOs around the step with everything resident, so that some bind and some do not.
  const plainStep = numLayers * (costs.layer.fixedMs + costs.layer.perUnitMs * n) +
    costs.sample.fixedMs + costs.sample.perUnitMs * n;
  for (const r of requests) {
    if (next() < 0.7) r.tbtSloMs = plainStep * (0.9 + next() * 0.8);
    if (next() < 0.5) r.readingRate = 1000 / (plainStep * (0.5 + next() * 1.5));
  }
  const input: PlanInput = {
    requests,
    numLayers,
    blockBytes: BLOCK_BYTES,
    blockTokens: BLOCK_TOKENS,
    budgetBlocks: Math.round(allBlocks * (0.3 + next() * 0.8)),
    prefetchRegionBlocks: next() < 0.7 ? Infinity : Math.round(allBlocks / numLayers * next()),
    costs,
    window,
    timeoutMs: 10_000,
    maxViolationsPerStep: pickOf([0, 0.5, 1, 2]),
    optimalityGap: 0,
  };
  // A region the pool reserved (counted once in the budget), drawn last so the draws above stay.
  if (Number.isFinite(input.prefetchRegionBlocks) && next() < 0.5) {
    input.regionReservedBlocks = input.prefetchRegionBlocks;
    input.budgetBlocks += input.prefetchRegionBlocks;
  }
  return input;
}
