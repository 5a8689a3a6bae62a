// The report: one Markdown table with the configurations side by side (best value per row in bold),
// a verdict that says which configuration served its users best and what made the difference, and
// SVG plots (TTFT CDF, per-request buffer occupancy, KV blocks per tier over time).

import { bufferChart, kvChart, ttftCdfChart } from "./charts.ts";
import type { ConfigResult } from "./run.ts";

export interface ReportInput {
  title: string;
  /** One line each, describing workload and run (already formatted). */
  context: string[];
  results: ConfigResult[];
  /** The command that replays exactly this workload. */
  replayCommand: string;
}

export interface Report {
  markdown: string;
  /** file name -> SVG text */
  svgs: Map<string, string>;
}

type Better = "higher" | "lower" | "none";
interface Row {
  label: string;
  better: Better;
  values: (number | null)[];
  format: (v: number) => string;
  /** Text to show instead of the number (e.g. "3 / 0 / 1"); when set, no bolding. */
  text?: (string | null)[];
}

const ms = (v: number) => v.toFixed(0);
const sec = (v: number) => (v >= 10 ? v.toFixed(1) : v.toFixed(2));
const pct = (v: number) => `${(v * 100).toFixed(1)}%`;
const num = (v: number) => (Number.isInteger(v) ? String(v) : v.toFixed(1));
const tps = (v: number) => v.toFixed(1);

/** File-name-safe form of a configuration name. */
export function slug(name: string): string {
  return name.replace(/[^A-Za-z0-9_-]+/g, "_").slice(0, 40) || "config";
}

function rows(results: ConfigResult[]): Row[] {
  const s = results.map((r) => r.summary);
  const v = results.map((r) => r.server);
  const get = <T>(xs: (T | null)[], f: (x: T) => number | null | undefined) =>
    xs.map((x) => (x ? f(x) ?? null : null));
  const tier = (name: string) =>
    v.map((m) => {
      const t = m?.kvBlocks.find((k) => k.tier === name);
      return t && t.points.length ? t.points.reduce((m, p) => Math.max(m, p[1]), -Infinity) : null;
    });
  const tierTotal = (name: string) =>
    v.map((m) => m?.kvBlocks.find((k) => k.tier === name)?.total ?? null);
  const swapDirs = [...new Set(v.flatMap((m) => Object.keys(m?.swaps ?? {})))].sort();
  return [
    {
      label: "requests: ok / refused (429) / failed / cancelled / timed out",
      better: "none",
      values: get(s, (x) => x.requests),
      format: num,
      text: s.map((
        x,
      ) => (x
        ? `${x.completed} / ${x.refused} / ${x.failed} / ${x.cancelled} / ${x.timedOut}`
        : null)
      ),
    },
    {
      label: "**effective tokens/s** (TokenFlow)",
      better: "higher",
      values: get(s, (x) => x.effectiveTokensPerS),
      format: tps,
    },
    {
      label: "raw tokens/s",
      better: "higher",
      values: get(s, (x) => x.rawTokensPerS),
      format: tps,
    },
    {
      label: "effective share of tokens",
      better: "higher",
      values: get(s, (x) => (x.tokens ? x.effectiveTokens / x.tokens : null)),
      format: pct,
    },
    { label: "refused (429)", better: "lower", values: get(s, (x) => x.refused), format: num },
    {
      label: "failed + timed out",
      better: "lower",
      values: get(s, (x) => x.failed + x.timedOut),
      format: num,
    },
    { label: "TTFT p50 (ms)", better: "lower", values: get(s, (x) => x.ttftMs.p50), format: ms },
    { label: "TTFT p95 (ms)", better: "lower", values: get(s, (x) => x.ttftMs.p95), format: ms },
    { label: "TTFT p99 (ms)", better: "lower", values: get(s, (x) => x.ttftMs.p99), format: ms },
    {
      label: "time between tokens p50 (ms)",
      better: "lower",
      values: get(s, (x) => x.tbtMs.p50),
      format: ms,
    },
    {
      label: "time between tokens p99 (ms)",
      better: "lower",
      values: get(s, (x) => x.tbtMs.p99),
      format: ms,
    },
    {
      label: "stall time, total (s)",
      better: "lower",
      values: get(s, (x) => x.stallTotalS),
      format: sec,
    },
    {
      label: "stall time per request, mean (s)",
      better: "lower",
      values: get(s, (x) => x.stallPerRequestMeanS),
      format: sec,
    },
    {
      label: "stall time per request, max (s)",
      better: "lower",
      values: get(s, (x) => x.stallPerRequestMaxS),
      format: sec,
    },
    {
      label: "requests that stalled (≥ 1 token's reading time in all)",
      better: "lower",
      values: get(s, (x) => x.stalledRequests),
      format: num,
    },
    {
      label: "TBT SLO attainment (tokens)",
      better: "higher",
      values: get(s, (x) => x.tbtAttainment),
      format: pct,
    },
    {
      label: "TPOT SLO attainment (requests)",
      better: "higher",
      values: get(s, (x) => x.tpotAttainment),
      format: pct,
    },
    {
      label: "TTFT SLO attainment (requests)",
      better: "higher",
      values: get(s, (x) => x.ttftAttainment),
      format: pct,
    },
    {
      label: "KV blocks, device: peak used / total",
      better: "none",
      values: tier("device"),
      format: num,
      text: tier("device").map((
        p,
        i,
      ) => (p === null ? null : `${p} / ${tierTotal("device")[i] ?? "?"}`)),
    },
    {
      label: "KV blocks, host: peak used / total",
      better: "none",
      values: tier("host"),
      format: num,
      text: tier("host").map((
        p,
        i,
      ) => (p === null ? null : `${p} / ${tierTotal("host")[i] ?? "?"}`)),
    },
    ...swapDirs.map((d): Row => ({
      label: `swaps ${d}`,
      better: "lower",
      values: v.map((m) => (m?.swaps ? m.swaps[d] ?? 0 : null)),
      format: num,
    })),
    { label: "preemptions", better: "lower", values: get(v, (x) => x.preemptions), format: num },
    {
      label: "planner solves",
      better: "none",
      values: get(v, (x) => x.plannerSolves),
      format: num,
    },
    {
      label: "planner solve, mean (ms)",
      better: "lower",
      values: get(v, (x) => x.plannerSolveMeanMs),
      format: (x) => x.toFixed(2),
    },
    {
      label: "peak queue depth",
      better: "none",
      values: get(v, (x) => x.peakQueueDepth),
      format: num,
    },
    {
      label: "peak running requests",
      better: "none",
      values: get(v, (x) => x.peakRunning),
      format: num,
    },
    {
      label: "tokens generated (server)",
      better: "none",
      values: get(v, (x) => x.tokensGenerated),
      format: num,
    },
    ...(s.some((x) => x && x.tokenCountMismatches > 0)
      ? [{
        label: "requests whose token count ≠ usage",
        better: "lower" as const,
        values: get(s, (x) => x.tokenCountMismatches),
        format: num,
      }]
      : []),
    {
      label: "run span, first send to last end (s)",
      better: "none",
      values: get(s, (x) => x.spanS),
      format: sec,
    },
  ];
}

function bestIndices(r: Row): Set<number> {
  if (r.better === "none") return new Set();
  const present = r.values.flatMap((
    x,
    i,
  ) => (x === null || !Number.isFinite(x) ? [] : [[x, i] as const]));
  if (present.length < 2) return new Set();
  const best = r.better === "higher"
    ? Math.max(...present.map((p) => p[0]))
    : Math.min(...present.map((p) => p[0]));
  const all = present.filter((p) => p[0] === best);
  // Everyone tied: nothing to point at.
  return all.length === present.length ? new Set() : new Set(all.map((p) => p[1]));
}

export function resultsTable(results: ConfigResult[]): string {
  const out = [
    `| metric | ${results.map((r) => `\`${r.config.name}\``).join(" | ")} |`,
    `|---|${results.map(() => "---:").join("|")}|`,
  ];
  for (const r of rows(results)) {
    if (r.values.every((x) => x === null)) continue; // a metric no configuration reported
    const best = bestIndices(r);
    const cells = r.values.map((x, i) => {
      const t = r.text?.[i] ?? (x === null || !Number.isFinite(x) ? "—" : r.format(x));
      return best.has(i) ? `**${t}**` : t;
    });
    out.push(`| ${r.label} | ${cells.join(" | ")} |`);
  }
  return out.join("\n");
}

/** Relative difference worth mentioning. */
const differs = (a: number, b: number) =>
  Math.abs(a - b) > 0.1 * Math.max(Math.abs(a), Math.abs(b), 1e-9);

/** Which configuration served its users best, and the measured differences that explain it. */
export function verdict(results: ConfigResult[]): string[] {
  const ok = results.filter((r) => r.summary && r.summary.effectiveTokensPerS !== null);
  const lines: string[] = [];
  for (const r of results.filter((r) => r.error)) {
    lines.push(`- \`${r.config.name}\` could not be measured: ${r.error!.split("\n")[0]}`);
  }
  if (ok.length === 0) return [...lines, "- No configuration produced measurements."];
  const ranked = [...ok].sort((a, b) =>
    (b.summary!.effectiveTokensPerS! - a.summary!.effectiveTokensPerS!) ||
    ((b.summary!.tbtAttainment ?? 0) - (a.summary!.tbtAttainment ?? 0))
  );
  const w = ranked[0];
  const ws = w.summary!;
  const f1 = (x: number) => x.toFixed(1);
  if (ranked.length === 1) {
    lines.push(
      `- \`${w.config.name}\`: ${f1(ws.effectiveTokensPerS!)} effective tokens/s of ${
        f1(ws.rawTokensPerS ?? 0)
      } raw.`,
    );
  } else {
    const r2 = ranked[1];
    const s2 = r2.summary!;
    lines.push(
      `- **\`${w.config.name}\` has the highest effective throughput** (tokens its users could ` +
        `read in time, TokenFlow): ${f1(ws.effectiveTokensPerS!)} tokens/s against ` +
        `${f1(s2.effectiveTokensPerS!)} for \`${r2.config.name}\`, the runner-up.`,
    );
    const why: string[] = [];
    const worse: string[] = [];
    const compare = (
      label: string,
      a: number | null,
      b: number | null,
      lowerBetter: boolean,
      fmt: (x: number) => string,
    ) => {
      if (a === null || b === null || !differs(a, b)) return;
      const better = lowerBetter ? a < b : a > b;
      (better ? why : worse).push(`${label} ${fmt(a)} vs ${fmt(b)}`);
    };
    compare("stall", ws.stallTotalS, s2.stallTotalS, true, (x) => `${x.toFixed(1)} s`);
    compare("TTFT p99", ws.ttftMs.p99, s2.ttftMs.p99, true, (x) => `${(x / 1000).toFixed(2)} s`);
    compare("TBT attainment", ws.tbtAttainment, s2.tbtAttainment, false, pct);
    compare("refused", ws.refused, s2.refused, true, num);
    compare("failed/timed out", ws.failed + ws.timedOut, s2.failed + s2.timedOut, true, num);
    compare("raw tokens/s", ws.rawTokensPerS, s2.rawTokensPerS, false, f1);
    compare(
      "preemptions",
      w.server?.preemptions ?? null,
      r2.server?.preemptions ?? null,
      true,
      num,
    );
    if (why.length) lines.push(`- Why: ${why.join("; ")}.`);
    if (worse.length) lines.push(`- At the cost of: ${worse.join("; ")}.`);
  }
  for (const r of ranked) {
    const s = r.summary!;
    const m = r.server;
    const facts = [
      `${s.stalledRequests} of ${s.requests} requests stalled (${
        s.stallTotalS.toFixed(1)
      } s in all)`,
      `TTFT p99 ${s.ttftMs.p99 === null ? "—" : `${(s.ttftMs.p99 / 1000).toFixed(2)} s`}`,
      `${s.refused} refused, ${s.failed + s.timedOut} failed or timed out`,
    ];
    if (m?.preemptions != null) facts.push(`${m.preemptions} preemptions`);
    if (m?.swaps) facts.push(`${Object.values(m.swaps).reduce((a, b) => a + b, 0)} swaps`);
    lines.push(`- \`${r.config.name}\`: ${facts.join("; ")}.`);
  }
  return lines;
}

export function buildReport(input: ReportInput): Report {
  const { results } = input;
  const svgs = new Map<string, string>();
  svgs.set("ttft_cdf.svg", ttftCdfChart(results));
  if (results.some((r) => r.server?.kvBlocks.length)) svgs.set("kv_blocks.svg", kvChart(results));
  const used = new Set<string>();
  const bufferFiles: [string, string][] = [];
  for (const r of results.filter((r) => r.records.length)) {
    let name = `buffer_${slug(r.config.name)}.svg`;
    for (let k = 2; used.has(name); k++) name = `buffer_${slug(r.config.name)}_${k}.svg`;
    used.add(name);
    svgs.set(name, bufferChart(r));
    bufferFiles.push([r.config.name, name]);
  }
  const md = [
    `# ${input.title}`,
    "",
    ...input.context.map((c) => `- ${c}`),
    "",
    "## Verdict",
    "",
    ...verdict(results),
    "",
    "## Results",
    "",
    "Configurations:",
    "",
    ...results.map((r) =>
      `- \`${r.config.name}\`: \`${r.config.flags.join(" ") || "(server defaults)"}\``
    ),
    "",
    resultsTable(results),
    "",
    "Best value per row in **bold** (rows without a better direction are not marked).",
    "",
    "## Plots",
    "",
    "![TTFT CDF](ttft_cdf.svg)",
    "",
    ...(svgs.has("kv_blocks.svg") ? ["![KV blocks per tier](kv_blocks.svg)", ""] : []),
    ...bufferFiles.flatMap(([n, f]) => [`![unread buffer, ${n}](${f})`, ""]),
    "## How the numbers are defined",
    "",
    "- Each client plays its stream to a reader at the request's reading rate: the first token is read on " +
    "arrival, then one token every 1/rate s; a token not there yet is a **stall** (time reading waits), and " +
    "the buffer is what arrived but is unread.",
    "- **Effective tokens/s** (TokenFlow): a token counts fully if, when it arrives, the request's unread buffer " +
    "is at most 10% of the request's received output, linearly less up to 20%, not at all above; divided by " +
    "the run span. Raw tokens/s divides all tokens by the same span.",
    "- **TBT attainment**: share of gaps between consecutive tokens within the request's TBT SLO (token level). " +
    "**TPOT attainment**: share of requests (with ≥ 2 tokens) whose mean time per output token is within it. " +
    "**TTFT attainment**: share of requests (that asked for tokens) whose first token came within the TTFT " +
    "SLO; refused and failed requests count as misses.",
    "- Everything is measured at the client, after the server's pacer. When the server paces a stream at its " +
    "reading rate, unread tokens wait in the server's deposit rather than the client's buffer, so the client " +
    "buffer stays small and the effective share near 100%; stalls, TTFT and refusals then carry the difference.",
    "- TTFT and time-between-tokens percentiles cover requests that received tokens; refusals and failures are " +
    "counted in their own rows and keep the TTFT CDF below 1.",
    "",
    "## Reproduce",
    "",
    "```",
    input.replayCommand,
    "```",
    "",
  ];
  return { markdown: md.join("\n"), svgs };
}
