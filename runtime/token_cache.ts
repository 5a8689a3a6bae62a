// eLLM's token-wise caching, the rule (runtime/token_cached.ts carries it out): under memory
// pressure a running request keeps on the device only the KV of its newest tokens; the KV of its
// oldest ones lives in one layer's worth of scratch blocks that every layer shares, recomputed in
// each step it decodes, ahead of its decode row (eLLM §2.3, §3.2). All layers run one after the
// other in a step, so each overwrites the scratch with its own keys and values just before its
// attention reads them: the request saves (layers − 1) blocks per uncached block and pays one
// recompute row per uncached token per step.
//
// How much to leave uncached is chosen online, every step, against the batch size (eLLM §4.1,
// §4.2.2): maximise the step's throughput b / T(b, r) over the batch size b (the running requests
// plus the queue's head) and the uncached ratio r, subject to
//   - memory: the cached KV of the b requests plus the scratch (eLLM's M_o) fits the device pool;
//   - latency: T(b, r) within the tightest TBT SLO among them (when the cost model predicts ms);
//   - 0 ≤ r ≤ 1, and here also: one step's rows (b decode rows + the recompute rows) fit maxRows.
// T grows with r, so for each b the best r is the least that fits (r_min(b)); b is enumerated
// (b ≤ the slots), which is exact for the integer problem where the paper runs a continuous
// solver. T is the engine's cost model for the step's rows (its per-step term is what makes a
// bigger batch pay); without one, a step's fixed cost is taken to equal that of maxRows rows.

/** A running request, as the rule sees it. */
export interface CacheCandidate {
  /** Positions its KV covers after its next decode row (eLLM's s_i). */
  tokens: number;
  /** Most of its oldest positions that may be left uncached (a multiple of the block size). */
  maxUncached: number;
}

export interface TokenCacheInput {
  /** The running requests; only decoding ones may leave any of their KV uncached. */
  running: readonly CacheCandidate[];
  /** Positions each queued request would need to be admitted, queue order (only as many as fit). */
  waiting: readonly number[];
  /** Device blocks (one layer each) the running requests hold plus the free ones. */
  budget: number;
  numLayers: number;
  blockSize: number;
  maxRows: number;
  /** Predicted ms of a step of `rows` rows; null: no cost model. */
  stepMs: (rows: number) => number | null;
  /** Tightest TBT SLO (ms) among the requests; null: none. */
  sloMs: number | null;
  /** Grid of r (default 1/32). */
  ratioStep?: number;
}

export interface TokenCacheDecision {
  /** Requests the step is sized for: the running ones and then the queue's head. */
  batch: number;
  /** Uncached ratio chosen for that batch. */
  ratio: number;
  /** Per running request (input order): its oldest positions left uncached. */
  uncached: number[];
  /** Predicted step cost (ms, or row units without a cost model). */
  cost: number;
}

/** The batch size and uncached ratio eLLM's rule picks, and each running request's share. */
export function chooseUncached(input: TokenCacheInput): TokenCacheDecision {
  const { running, waiting, numLayers: L, blockSize: B, maxRows } = input;
  const step = input.ratioStep ?? 1 / 32;
  const uncachedAt = (r: number) =>
    running.map((c) => Math.min(Math.floor((r * c.tokens) / B) * B, c.maxUncached));
  const cost = (rows: number) => input.stepMs(rows) ?? 1 + rows / maxRows;
  let best: TokenCacheDecision | null = null;
  for (let b = running.length; b <= running.length + waiting.length; b++) {
    // Admitted requests start fully cached; their prefill rows are bounded by the step anyway.
    let fixed = 0;
    for (let j = 0; j < b - running.length; j++) fixed += L * Math.ceil(waiting[j] / B);
    for (let i = 0; i * step <= 1 + 1e-9; i++) {
      const r = Math.min(1, i * step);
      const uncached = uncachedAt(r);
      let blocks = fixed;
      let rows = b;
      running.forEach((c, k) => {
        const gone = uncached[k] / B;
        blocks += L * (Math.ceil(c.tokens / B) - gone) + gone; // cached KV + the shared scratch
        rows += uncached[k];
      });
      if (rows > maxRows) break; // more r only adds rows
      if (blocks > input.budget) continue;
      const t = cost(rows);
      if (input.sloMs !== null && input.stepMs(rows) !== null && t > input.sloMs) break;
      const better = best === null || b / t > best.batch / best.cost + 1e-12;
      if (better) best = { batch: b, ratio: r, uncached, cost: t };
      break; // r_min(b): the least r that fits
    }
  }
  if (best) return best;
  // Not even the running requests fit: free what the rows allow, preemption does the rest.
  let r = 0;
  while (r + step <= 1 && sum(uncachedAt(r + step)) + running.length <= maxRows) r += step;
  const uncached = uncachedAt(r);
  return { batch: running.length, ratio: r, uncached, cost: cost(running.length + sum(uncached)) };
}

function sum(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}
