// The report's plots: TTFT CDF across configurations, per-request unread buffer over time for one
// configuration, and KV blocks per tier over time across configurations.

import { ttftCdf } from "./metrics.ts";
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

export function bufferChart(r: ConfigResult): string {
  const withTokens = r.records.filter((x) => x.arrivalsMs.length > 0);
  const stride = Math.max(1, Math.ceil(withTokens.length / MAX_BUFFER_LINES));
  const shown = withTokens.filter((_, i) => i % stride === 0);
  const series: Series[] = shown.map((x) => ({
    name: `#${x.id} (${x.readingRate} tok/s)`,
    step: true,
    points: bufferSeries(x.arrivalsMs, x.displayMs).map(([t, b]) => [(x.sentAtMs + t) / 1000, b]),
  }));
  return lineChart({
    title: `Unread buffer per request — ${r.config.name}`,
    note: [
      stride > 1
        ? `every ${stride}th request of ${withTokens.length} shown`
        : "tokens arrived but not yet read",
      ...(series.every((x) => x.points.every((p) => p[1] === 0))
        ? ["all empty: no token arrived ahead of its reader"]
        : []),
    ].join("; "),
    xLabel: "time since run start (s)",
    yLabel: "unread tokens",
    legendLimit: 12,
    series,
  });
}

export function kvChart(results: ConfigResult[]): string {
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
    title: "KV blocks used per tier",
    note: "solid: device, dashed: host; legend shows each tier's total",
    xLabel: "time since run start (s)",
    yLabel: "blocks used",
    series,
  });
}
