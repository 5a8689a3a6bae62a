// eLLM's token-wise caching, the rule (runtime/token_cached.ts carries it out): under memory
// pressure a running request keeps on the device only the KV of its newest tokens; the KV of its
// oldest ones lives in one layer's worth of scratch blocks that every layer shares, recomputed in
// each step it decodes, ahead of its decode row (eLLM §2.3, §3.2). All layers run one after the
// other in a step, so each overwrites the scratch with its own keys and values just before its
// attention reads them: the request saves (layers − 1) blocks per uncached block and pays one
// recompute row per uncached token per step.
//
// How much to leave uncached is chosen online, every step, against the batch size (eLLM eq. 1,
// §4.2.2): maximise the step's throughput b / T(b, r) over the batch size b (the running requests
// plus the queue's head) and the uncached ratio r, subject to
//   - memory: the cached KV of the b requests plus the scratch (eLLM's M_o) fits the device pool;
//   - latency: T(b, r) + WT_max within the tightest TBT SLO among them (when the cost model
//     predicts ms). WT_max is the waiting time per output token: the prefill rows of the requests
//     b admits share the step, stalling every decode row once; TPOT is a request's mean over its
//     output (the paper's attainment counts requests), so that stall is spread over the fewest
//     output tokens a running request asks for;
//   - 0 ≤ r ≤ 1; and one step's rows (b decode rows + the recompute rows) fit maxRows, the
//     engine's rows per step (a request's recompute must share its decode row's step: the scratch
//     holds one layer's KV at a time). An engine whose step takes a whole prompt (vLLM v0's 4,096
//     rows) leaves r to the other constraints.
// T grows with r, so for each b the best r is the least that fits (r_min(b)); b is enumerated
// (b ≤ the slots), which is exact for the integer problem where the paper runs a continuous
// solver. T is eq. 4 over the step's rows: the engine's cost model per row stands for eq. 2/3's
// 24h²L per token (FLOPS calibrated on this engine), and the context terms are added in those
// rows' units: 4hL(s_i + 1) per decode row (eq. 3) and 4hL(s_i·r)² per recomputed prefix (eq. 2),
// i.e. (s_i + 1 + (s_i·r)²) / 6h rows. The LM-head terms 2hV·s_i(1 + r) of eq. 5 are left out:
// no row but the sampled one goes through the head. Without a cost model, a step's fixed cost is
// taken to equal that of maxRows rows. The chosen b also bounds admission (token_cached.ts).

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
  /** Fewest output tokens a running request asks for: what a stall is spread over (default 1). */
  outputTokens?: number;
  /** Tightest TBT SLO (ms) among the requests; null: none. */
  sloMs: number | null;
  /** eLLM's h: KV width per layer (K or V elements per token), for eq. 2/3's context terms; 0:
   * no context term. */
  hidden?: number;
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
  /** Predicted step cost T(b, r) (ms, or row units without a cost model), context terms in. */
  cost: number;
  /** Predicted WT_max: what the admitted requests' prefill rows add per output token (eq. 1). */
  waitMs: number;
}

/** The batch size and uncached ratio eLLM's rule picks, and each running request's share. */
export function chooseUncached(input: TokenCacheInput): TokenCacheDecision {
  const { running, waiting, numLayers: L, blockSize: B, maxRows } = input;
  const step = input.ratioStep ?? 1 / 32;
  const h = input.hidden ?? 0, spread = Math.max(1, input.outputTokens ?? 1);
  const cost = (rows: number) => input.stepMs(rows) ?? 1 + rows / maxRows;
  /** The first `kept` running requests' shares at r (the others: 0, they are preempted). */
  const uncachedAt = (r: number, kept: number) =>
    running.map((c, k) =>
      k < kept ? Math.min(Math.floor((r * c.tokens) / B) * B, c.maxUncached) : 0
    );
  // Eq. 3's 4hL(s_i + 1) and eq. 2's 4hL(s_i·r)², in units of eq. 2/3's 24h²L per row.
  const contextRows = (uncached: readonly number[], kept: number) =>
    h > 0
      ? running.slice(0, kept).reduce((a, c, k) => a + c.tokens + 1 + uncached[k] ** 2, 0) /
        (6 * h)
      : 0;
  /**
   * Batch b at the least r that fits memory and one step's rows (r_min(b)): the first
   * min(b, running) running requests and the queue's head; `sloMet` false when its T + WT_max
   * breaks the SLO. Null when no r fits.
   */
  const atLeastR = (b: number): (TokenCacheDecision & { sloMet: boolean }) | null => {
    const kept = Math.min(b, running.length);
    // Admitted requests start fully cached; their prefill rows share the step (WT_max).
    let fixed = 0, prefill = 0;
    for (let j = 0; j < b - kept; j++) {
      fixed += L * Math.ceil(waiting[j] / B);
      prefill += waiting[j];
    }
    for (let i = 0; i * step <= 1 + 1e-9; i++) {
      const r = Math.min(1, i * step);
      const uncached = uncachedAt(r, kept);
      let blocks = fixed;
      let rows = b;
      running.slice(0, kept).forEach((c, k) => {
        const gone = uncached[k] / B;
        blocks += L * (Math.ceil(c.tokens / B) - gone) + gone; // cached KV + the shared scratch
        rows += uncached[k];
      });
      if (rows > maxRows) return null; // more r only adds rows
      if (blocks > input.budget) continue;
      const work = rows + contextRows(uncached, kept);
      const t = cost(work);
      const wait = (cost(work + Math.min(prefill, maxRows - rows)) - t) / spread;
      const sloMet = input.sloMs === null || input.stepMs(rows) === null ||
        t + wait <= input.sloMs;
      return { batch: b, ratio: r, uncached, cost: t, waitMs: wait, sloMet };
    }
    return null;
  };
  const better = (d: TokenCacheDecision, than: TokenCacheDecision | null) =>
    than === null || d.batch / d.cost > than.batch / than.cost + 1e-12;
  let best: TokenCacheDecision | null = null;
  // The running requests at the least r their memory needs, should no batch meet the SLO.
  let late: TokenCacheDecision | null = null;
  for (let b = running.length; b <= running.length + waiting.length; b++) {
    const d = atLeastR(b);
    // A bigger batch needs more blocks, rows and time at every r: none fits past this one.
    if (d === null || !d.sloMet) {
      if (d !== null && b === running.length) late = d;
      break;
    }
    if (better(d, best)) best = d;
  }
  // Eq. 1's b is free below the running batch too (b ≤ B read as a cap on the running batch): a
  // smaller batch whose b/T is strictly better, or the only one meeting memory and the SLO, is
  // taken, and the newest running requests are preempted (token_cached.ts: beyond).
  for (let b = running.length - 1; b >= 1; b--) {
    const d = atLeastR(b);
    if (d !== null && d.sloMet && better(d, best)) best = d;
  }
  if (best ?? late) return strip((best ?? late)!);
  // Not even one request's KV fits at any r the step's rows allow: nothing is left uncached, and
  // preemption makes room.
  const uncached = running.map(() => 0);
  return { batch: running.length, ratio: 0, uncached, cost: cost(running.length), waitMs: 0 };
}

/** The decision without atLeastR's SLO flag. */
function strip(d: TokenCacheDecision & { sloMet?: boolean }): TokenCacheDecision {
  const { sloMet: _, ...decision } = d;
  return decision;
}
