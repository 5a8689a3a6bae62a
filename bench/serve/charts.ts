// The report's plots: TTFT CDF across configurations; per configuration (one chart each), the
// per-request unread buffer over time and KV blocks per tier over time; and KV blocks per tier of
// all configurations together.

import { bufferEntryTimes, ttftCdf } from "./metrics.ts";
import { bufferSeries } from "./playout.ts";
import type { ConfigResult } from "./run.ts";
import { lineChart, PALETTE, type Series } from "./svg.ts";

const MAX_BUFFER_LINES = 40;

export function ttftCdfChart(results: ConfigResult[]): string {
  const curves = results.filter((r) => r.records.length).map((r) => ({
    name: r.config.name,
    cdf: ttftCdf(r.records),
  }));
  const xMax = curves.reduce(
    (m, c) => Math.max(m, c.cdf.length ? c.cdf[c.cdf.length - 1][0] : 0),
    0,
  );
  const series: Series[] = curves.map((c, i) => ({
    name: c.name,
    step: true,
    color: PALETTE[i % PALETTE.length],
    points: [[0, 0], ...c.cdf, [xMax, c.cdf.length ? c.cdf[c.cdf.length - 1][1] : 0]],
  }));
  return lineChart({
    title: "Time to first token (CDF)",
    note:
      "share of all submitted requests; refused or failed ones never arrive, so a curve can end below 1",
    xLabel: "TTFT (s)",
    yLabel: "share of requests",
    yRange: [0, 1],
    series,
  });
}

/**
 * One configuration's requests: unread tokens over time, from when each token was generated (the
 * server's timing; else its arrival at the client) until its reader read it.
 */
export function bufferChart(r: ConfigResult): string {
  const withTokens = r.records.filter((x) => x.arrivalsMs.length > 0);
  const stride = Math.max(1, Math.ceil(withTokens.length / MAX_BUFFER_LINES));
  const shown = withTokens.filter((_, i) => i % stride === 0);
  const sources = new Set<string>();
  const series: Series[] = shown.map((x) => {
    const entry = bufferEntryTimes(x);
    sources.add(entry.source);
    return {
      name: `#${x.id} (${x.readingRate} tok/s)`,
      step: true,
      points: bufferSeries(entry.times, x.displayMs).map(([t, b]) => [(x.sentAtMs + t) / 1000, b]),
    };
  });
  const what = sources.has("client")
    ? sources.has("server")
      ? "generated (server timing) or arrived (no timing) but not yet read"
      : "arrived at the client but not yet read (the server gave no generation times)"
    : "generated at the server but not yet read by the reader";
  return lineChart({
    title: `Unread buffer per request — ${r.config.name}`,
    note: [
      stride > 1 ? `every ${stride}th request of ${withTokens.length} shown; ${what}` : what,
      ...(series.every((x) => x.points.every((p) => p[1] === 0))
        ? ["all empty: no token was ever waiting for its reader"]
        : []),
    ].join("; "),
    xLabel: "time since run start (s)",
    yLabel: "unread tokens",
    legendLimit: 12,
    series,
  });
}

/** KV blocks per tier over time: all configurations on one chart, or one configuration alone. */
export function kvChart(results: ConfigResult[], title = "KV blocks used per tier"): string {
  const series: Series[] = [];
  results.forEach((r, i) => {
    for (const t of r.server?.kvBlocks ?? []) {
      series.push({
        name: `${r.config.name} ${t.tier || "(no tier)"}${t.total !== null ? ` /${t.total}` : ""}`,
        step: true,
        dashed: t.tier === "host",
        color: PALETTE[i % PALETTE.length],
        points: t.points,
      });
    }
  });
  return lineChart({
    title,
    note: "solid: device, dashed: host; legend shows each tier's total",
    xLabel: "time since run start (s)",
    yLabel: "blocks used",
    series,
  });
}
