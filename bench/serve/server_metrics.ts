// What the server said about itself during a run, from the /metrics scrapes: KV blocks per tier
// over time, gauge peaks (queue, running, paused), and counter deltas (swaps, preemptions,
// recomputed tokens, planner solves, the server's own effective-token count). A metric the server
// does not export is null here and "—" in the report.

import type { Sample, Scrape } from "./prometheus.ts";

export interface TierSeries {
  tier: string;
  /** Last seen sluice_kv_blocks_total for the tier. */
  total: number | null;
  /** [seconds since run start, blocks used]. */
  points: [number, number][];
}

export interface ServerMetricsSummary {
  scrapes: number;
  kvBlocks: TierSeries[];
  swaps: Record<string, number> | null;
  preemptions: number | null;
  plannerSolves: number | null;
  plannerSolveMeanMs: number | null;
  peakQueueDepth: number | null;
  peakRunning: number | null;
  /** Most requests paused at once (their streams playing from their buffers), sampled. */
  peakPaused: number | null;
  /** Prefill rows of positions computed before (KV lost to a preemption). */
  recomputedTokens: number | null;
  tokensGenerated: number | null;
  /** The server's TokenFlow count over the requests that ended during the run. */
  effectiveTokens: number | null;
}

const sumOf = (
  samples: Sample[],
  name: string,
  match: (l: Record<string, string>) => boolean = () => true,
) => {
  const hits = samples.filter((s) => s.name === name && match(s.labels));
  return hits.length ? hits.reduce((t, s) => t + s.value, 0) : null;
};

/** last - first over the scrapes that carry the counter (counters only grow while one server lives). */
function counterDelta(
  scrapes: Scrape[],
  name: string,
  match?: (l: Record<string, string>) => boolean,
): number | null {
  const vals = scrapes.map((s) => sumOf(s.samples, name, match)).filter((v): v is number =>
    v !== null
  );
  return vals.length ? vals[vals.length - 1] - vals[0] : null;
}

function gaugePeak(scrapes: Scrape[], name: string): number | null {
  const vals = scrapes.map((s) => sumOf(s.samples, name)).filter((v): v is number => v !== null);
  return vals.length ? vals.reduce((a, b) => Math.max(a, b)) : null;
}

export function summarizeServerMetrics(scrapes: Scrape[]): ServerMetricsSummary {
  const tiers = [
    ...new Set(
      scrapes.flatMap((s) =>
        s.samples.filter((x) => x.name === "sluice_kv_blocks_used").map((x) => x.labels.tier ?? "")
      ),
    ),
  ].sort();
  const kvBlocks = tiers.map((tier) => {
    const isTier = (l: Record<string, string>) => (l.tier ?? "") === tier;
    const points: [number, number][] = [];
    let total: number | null = null;
    for (const s of scrapes) {
      const used = sumOf(s.samples, "sluice_kv_blocks_used", isTier);
      if (used !== null) points.push([s.tMs / 1000, used]);
      total = sumOf(s.samples, "sluice_kv_blocks_total", isTier) ?? total;
    }
    return { tier, total, points };
  });
  const directions = [
    ...new Set(
      scrapes.flatMap((s) =>
        s.samples.filter((x) => x.name === "sluice_swaps_total").map((x) =>
          x.labels.direction ?? ""
        )
      ),
    ),
  ].sort();
  const swaps = directions.length
    ? Object.fromEntries(
      directions.map((d) => [
        d,
        counterDelta(scrapes, "sluice_swaps_total", (l) => (l.direction ?? "") === d) ?? 0,
      ]),
    )
    : null;
  const solveSum = counterDelta(scrapes, "sluice_planner_solve_seconds_sum");
  const solveCount = counterDelta(scrapes, "sluice_planner_solve_seconds_count");
  return {
    scrapes: scrapes.length,
    kvBlocks,
    swaps,
    preemptions: counterDelta(scrapes, "sluice_preemptions_total"),
    plannerSolves: counterDelta(scrapes, "sluice_planner_solves_total") ?? solveCount,
    plannerSolveMeanMs: solveSum !== null && solveCount ? (solveSum / solveCount) * 1000 : null,
    peakQueueDepth: gaugePeak(scrapes, "sluice_queue_depth"),
    peakRunning: gaugePeak(scrapes, "sluice_running_requests"),
    peakPaused: gaugePeak(scrapes, "sluice_paused_requests"),
    recomputedTokens: counterDelta(scrapes, "sluice_recomputed_tokens_total"),
    tokensGenerated: counterDelta(scrapes, "sluice_tokens_generated_total"),
    effectiveTokens: counterDelta(scrapes, "sluice_effective_tokens_total"),
  };
}
