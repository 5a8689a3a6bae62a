// What each configuration gives its users, computed from the clients' token timelines.
//
// Definitions (times in ms, per request i with n_i received tokens):
// - TTFT: arrival of the first token after sending. Percentiles over requests that got one.
// - Time between tokens: gaps arrival_j - arrival_{j-1}, pooled over all requests.
// - TBT attainment (OrbitFlow, token level): share of gaps <= the request's TBT SLO.
// - TPOT (OrbitFlow, request level): (arrival_last - arrival_first) / (n - 1) for n >= 2; a request
//   attains its TPOT SLO when that average is <= its per-token SLO (slo_tbt_ms; the contract has
//   one per-token SLO and OrbitFlow applies the same target to both).
// - TTFT attainment: share of submitted requests whose first token came within slo_ttft_ms;
//   refused, failed and timed-out requests that got no token count as misses; requests that asked
//   for zero tokens are left out (nothing to be late for).
// - SLO goodput: share of the requests judged for TTFT that met both SLOs: the stream ended as
//   asked (ok, or the reader hung up as the workload said), the first token came within
//   slo_ttft_ms, and the request-level TBT judgement above (TPOT <= slo_tbt_ms) held; a request
//   with fewer than two tokens has no TPOT and is judged by its TTFT alone.
// - Stall: playout.ts's rebuffer time, per request and summed. A request "stalled" when its stalls
//   add up to at least one token's reading time: delivery jitter from a server pacing at the reading
//   rate costs a few ms once (the reader's clock only moves later), a stream slower than its reader
//   keeps adding up.
// - Effective throughput (TokenFlow): token j of a request with L = n_i received tokens weighs
//   w_j = clamp((0.2 L - B_j) / (0.1 L), 0, 1) where B_j is the unread buffer when it was
//   generated: full weight up to 10% of L buffered, linearly down to zero at 20%. Effective
//   tokens/s is sum(w) over the run span T (first request sent -> last request finished); raw
//   tokens/s is the token count over the same T.
// - The unread buffer is generated-but-not-yet-read tokens: a token enters it when the server
//   generated it (Sluice reports this per token, `sluice_timing`) and leaves it when the reader
//   reads it (display time). A server that paces its stream keeps the buffer on its side, so only
//   its generation times show it. Without them (other servers) a token enters at its arrival at the
//   client, which for a pacing server makes the buffer ~0 and effective = raw.

import { bufferAtArrivals, stallMs } from "./playout.ts";
import type { RequestRecord } from "./record.ts";

/** Linear interpolation between closest ranks (numpy's default); null for no data. */
export function percentile(values: readonly number[], p: number): number | null {
  if (values.length === 0) return null;
  if (!(p >= 0 && p <= 100)) throw new Error(`percentile ${p} outside [0, 100]`);
  const s = [...values].sort((a, b) => a - b);
  const rank = (p / 100) * (s.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return s[lo] + (s[hi] - s[lo]) * (rank - lo);
}

/** TokenFlow's token weight for buffer b in a request of L output tokens (exact for integers). */
export function tokenWeight(buffer: number, outputLen: number): number {
  if (outputLen <= 0) return 0;
  // (0.2L - b) / (0.1L) written as (2L - 10b) / L to stay exact in floating point.
  return Math.min(1, Math.max(0, (2 * outputLen - 10 * buffer) / outputLen));
}

export interface RequestMetrics {
  id: number;
  outcome: RequestRecord["outcome"];
  tokens: number;
  /** Where its tokens' entries into the unread buffer come from (see bufferEntryTimes). */
  bufferSource: "server" | "client";
  ttftMs: number | null;
  tpotMs: number | null;
  gapsMs: number[];
  stallMs: number;
  /** The reader lost at least one token's reading time (1/rate) to stalls in all. */
  stalled: boolean;
  effectiveTokens: number;
  tbtMet: number;
  /** null when the request has no TPOT (fewer than two tokens). */
  tpotMet: boolean | null;
  /** null when the request asked for no tokens and got none. */
  ttftMet: boolean | null;
  /** Met both SLOs (SLO goodput); null when TTFT is not judged. */
  sloMet: boolean | null;
}

/**
 * When each token entered the unread buffer: its generation time at the server when the record
 * has one for every token (raised to keep them in order and capped at its arrival, which a
 * loopback send can only follow), else its arrival at the client.
 */
export function bufferEntryTimes(
  r: RequestRecord,
): { times: number[]; source: "server" | "client" } {
  const a = r.arrivalsMs;
  const g = r.generatedMs;
  if (!g || g.length !== a.length || a.length === 0) return { times: a, source: "client" };
  let latest = -Infinity;
  const times = g.map((t, j) => {
    latest = Math.max(latest, t);
    return Math.min(latest, a[j]);
  });
  return { times, source: "server" };
}

/** SLO goodput's rule for one request (see the header): ended as asked, TTFT and TPOT met. */
export function sloMet(
  outcome: RequestRecord["outcome"],
  ttftMet: boolean,
  tpotMet: boolean | null,
): boolean {
  return (outcome === "ok" || outcome === "cancelled") && ttftMet && tpotMet !== false;
}

export function requestMetrics(r: RequestRecord): RequestMetrics {
  const a = r.arrivalsMs;
  const n = a.length;
  if (r.displayMs.length !== n) {
    throw new Error(`request ${r.id}: ${n} arrivals but ${r.displayMs.length} display times`);
  }
  const gaps = a.slice(1).map((t, j) => t - a[j]);
  const entry = bufferEntryTimes(r);
  const buffers = bufferAtArrivals(entry.times, r.displayMs);
  const tpot = n >= 2 ? (a[n - 1] - a[0]) / (n - 1) : null;
  const ttft = n > 0 ? a[0] : null;
  const askedNothing = r.maxTokens === 0 && n === 0;
  const stall = n > 0 ? stallMs(a, r.displayMs, r.readingRate) : 0;
  const tpotMet = tpot === null ? null : tpot <= r.sloTbtMs;
  const ttftMet = askedNothing ? null : ttft !== null && ttft <= r.sloTtftMs;
  return {
    id: r.id,
    outcome: r.outcome,
    tokens: n,
    bufferSource: entry.source,
    ttftMs: ttft,
    tpotMs: tpot,
    gapsMs: gaps,
    stallMs: stall,
    stalled: stall >= 1000 / r.readingRate,
    effectiveTokens: buffers.reduce((s, b) => s + tokenWeight(b, n), 0),
    tbtMet: gaps.filter((g) => g <= r.sloTbtMs).length,
    tpotMet,
    ttftMet,
    sloMet: ttftMet === null ? null : sloMet(r.outcome, ttftMet, tpotMet),
  };
}

export interface Quantiles {
  p50: number | null;
  p95: number | null;
  p99: number | null;
  mean: number | null;
}

export interface RunSummary {
  requests: number;
  completed: number;
  refused: number;
  failed: number;
  cancelled: number;
  timedOut: number;
  tokens: number;
  effectiveTokens: number;
  /**
   * Where the unread buffer (effective throughput) was measured: "server" when every request
   * with tokens came with the server's generation times, "client" when none did, else "mixed";
   * null with no tokens at all.
   */
  bufferSource: "server" | "client" | "mixed" | null;
  /** First request sent to last request finished, seconds. */
  spanS: number;
  rawTokensPerS: number | null;
  effectiveTokensPerS: number | null;
  ttftMs: Quantiles;
  tbtMs: Quantiles;
  tpotMs: Quantiles;
  stallTotalS: number;
  /** Mean and max over requests that received at least one token. */
  stallPerRequestMeanS: number | null;
  stallPerRequestMaxS: number | null;
  /** Requests whose stalls add up to at least one token's reading time. */
  stalledRequests: number;
  /** Completed requests whose counted tokens differ from the server's usage.completion_tokens
   * (the client counts chunks; a non-zero value means timelines are off by that many tokens). */
  tokenCountMismatches: number;
  /** Shares in [0, 1]; null when nothing was measured. */
  tbtAttainment: number | null;
  tpotAttainment: number | null;
  ttftAttainment: number | null;
  /** Requests that met both SLOs, and their share of those judged for TTFT (SLO goodput). */
  sloGoodRequests: number;
  sloGoodput: number | null;
}

function quantiles(v: number[]): Quantiles {
  return {
    p50: percentile(v, 50),
    p95: percentile(v, 95),
    p99: percentile(v, 99),
    mean: v.length ? v.reduce((s, x) => s + x, 0) / v.length : null,
  };
}

const share = (num: number, den: number) => (den > 0 ? num / den : null);

export function summarize(records: readonly RequestRecord[]): RunSummary {
  const per = records.map(requestMetrics);
  const count = (o: RequestRecord["outcome"]) => records.filter((r) => r.outcome === o).length;
  const tokens = per.reduce((s, m) => s + m.tokens, 0);
  const effective = per.reduce((s, m) => s + m.effectiveTokens, 0);
  const start = Math.min(...records.map((r) => r.sentAtMs));
  const end = Math.max(...records.map((r) => r.endAtMs));
  const spanS = records.length ? Math.max(0, end - start) / 1000 : 0;
  const rate = (x: number) => (spanS > 0 ? x / spanS : null);
  const withTokens = per.filter((m) => m.tokens > 0);
  const timed = withTokens.filter((m) => m.bufferSource === "server").length;
  const stalls = withTokens.map((m) => m.stallMs / 1000);
  const gaps = per.flatMap((m) => m.gapsMs);
  const tpots = per.flatMap((m) => (m.tpotMs === null ? [] : [m.tpotMs]));
  const ttftJudged = per.filter((m) => m.ttftMet !== null);
  const tpotJudged = per.filter((m) => m.tpotMet !== null);
  return {
    requests: records.length,
    completed: count("ok"),
    refused: count("refused"),
    failed: count("failed"),
    cancelled: count("cancelled"),
    timedOut: count("timeout"),
    tokens,
    effectiveTokens: effective,
    bufferSource: withTokens.length === 0
      ? null
      : timed === withTokens.length
      ? "server"
      : timed === 0
      ? "client"
      : "mixed",
    spanS,
    rawTokensPerS: rate(tokens),
    effectiveTokensPerS: rate(effective),
    ttftMs: quantiles(per.flatMap((m) => (m.ttftMs === null ? [] : [m.ttftMs]))),
    tbtMs: quantiles(gaps),
    tpotMs: quantiles(tpots),
    stallTotalS: stalls.reduce((s, x) => s + x, 0),
    stallPerRequestMeanS: stalls.length ? stalls.reduce((s, x) => s + x, 0) / stalls.length : null,
    stallPerRequestMaxS: stalls.length ? stalls.reduce((a, b) => Math.max(a, b)) : null,
    stalledRequests: per.filter((m) => m.stalled).length,
    tokenCountMismatches:
      records.filter((r) =>
        r.outcome === "ok" && r.usageCompletionTokens !== undefined &&
        r.usageCompletionTokens !== r.arrivalsMs.length
      ).length,
    tbtAttainment: share(per.reduce((s, m) => s + m.tbtMet, 0), gaps.length),
    tpotAttainment: share(tpotJudged.filter((m) => m.tpotMet).length, tpotJudged.length),
    ttftAttainment: share(ttftJudged.filter((m) => m.ttftMet).length, ttftJudged.length),
    sloGoodRequests: per.filter((m) => m.sloMet).length,
    sloGoodput: share(per.filter((m) => m.sloMet).length, ttftJudged.length),
  };
}

/** Empirical TTFT CDF over all submitted requests: [ttft s, share of all requests with a first
 * token by then]. Requests that never got a token keep the curve below 1. */
export function ttftCdf(records: readonly RequestRecord[]): [number, number][] {
  const ttfts = records.flatMap((r) => (r.arrivalsMs.length ? [r.arrivalsMs[0] / 1000] : [])).sort((
    a,
    b,
  ) => a - b);
  const n = records.length;
  return ttfts.map((t, i) => [t, (i + 1) / n]);
}
