// The responsiveness bench's arithmetic, kept pure so it can be unit-tested on hand-made timelines:
// latency summaries, the largest gap a stream saw during a time window, and a paced stream's
// deviation from its cadence. Times are in milliseconds.

import { percentile } from "../serve/metrics.ts";

/** One SSE chunk that carried tokens: when it arrived and how many tokens it held. */
export interface ChunkArrival {
  atMs: number;
  tokens: number;
}

export interface Summary {
  count: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}

export function summarize(values: readonly number[]): Summary {
  return {
    count: values.length,
    p50: percentile(values, 50),
    p99: percentile(values, 99),
    max: values.length ? Math.max(...values) : null,
  };
}

/**
 * The largest gap between consecutive arrivals that overlaps the window [fromMs, toMs]. Gaps are
 * whole (not clipped to the window). When no arrival follows the window's end, the open gap from
 * the last arrival to `toMs` counts, and likewise from `fromMs` to the first arrival when none
 * precedes the window: a stream that went silent still reports how long it was silent. Null for a
 * stream with no arrivals at all.
 */
export function largestGapDuring(
  arrivalsMs: readonly number[],
  fromMs: number,
  toMs: number,
): number | null {
  if (arrivalsMs.length === 0) return null;
  const a = [...arrivalsMs].sort((x, y) => x - y);
  const points = [
    ...(a[0] > fromMs ? [fromMs] : []),
    ...a,
    ...(a[a.length - 1] < toMs ? [toMs] : []),
  ];
  let largest = 0;
  for (let i = 1; i < points.length; i++) {
    if (points[i] > fromMs && points[i - 1] < toMs) {
      largest = Math.max(largest, points[i] - points[i - 1]);
    }
  }
  return largest;
}

/** Arrivals inside [fromMs, toMs]. */
export function arrivalsDuring(
  arrivalsMs: readonly number[],
  fromMs: number,
  toMs: number,
): number {
  return arrivalsMs.filter((t) => t >= fromMs && t <= toMs).length;
}

/**
 * |gap − expected| for every chunk after the first (the first chunk's wait is TTFT, not cadence).
 * A chunk holding k tokens is expected k intervals after the previous one: the pacer releases one
 * token per interval, and the server's text stream may hold a token back (an incomplete UTF-8
 * sequence) and send it with the next.
 */
export function cadenceDeviations(chunks: readonly ChunkArrival[], intervalMs: number): number[] {
  const out: number[] = [];
  for (let i = 1; i < chunks.length; i++) {
    const gap = chunks[i].atMs - chunks[i - 1].atMs;
    out.push(Math.abs(gap - chunks[i].tokens * intervalMs));
  }
  return out;
}

/** Tokens per second from the first chunk to the last, counting the tokens after the first
 * chunk; null with fewer than two chunks or no time between them. */
export function meanRate(chunks: readonly ChunkArrival[]): number | null {
  if (chunks.length < 2) return null;
  const spanMs = chunks[chunks.length - 1].atMs - chunks[0].atMs;
  if (!(spanMs > 0)) return null;
  const tokens = chunks.slice(1).reduce((s, c) => s + c.tokens, 0);
  return tokens / (spanMs / 1000);
}

/** Tokens per second carried by the chunks that arrived inside (fromMs, toMs]; null for an empty
 * window. Measures how fast a stream was served over another stream's lifetime. */
export function rateDuring(
  chunks: readonly ChunkArrival[],
  fromMs: number,
  toMs: number,
): number | null {
  if (!(toMs > fromMs)) return null;
  const tokens = chunks.filter((c) => c.atMs > fromMs && c.atMs <= toMs)
    .reduce((s, c) => s + c.tokens, 0);
  return tokens / ((toMs - fromMs) / 1000);
}
