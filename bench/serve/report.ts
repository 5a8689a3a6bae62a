// The report: one Markdown table with the configurations side by side (best value per row in bold),
// a verdict that says which configuration served its users best and what made the difference, the
// goals each configuration meets or misses against a baseline configuration, and SVG plots (TTFT
// CDF; per configuration, per-request buffer occupancy and KV blocks per tier over time).

import { bufferChart, kvChart, ttftCdfChart } from "./charts.ts";
import type { ConfigResult } from "./run.ts";

export interface ReportInput {
  title: string;
  /** One line each, describing workload and run (already formatted). */
  context: string[];
  results: ConfigResult[];
  /** The command that replays exactly this workload. */
  replayCommand: string;
  /** The configuration the goals are judged against; default: one named `fcfs`, if any. */
  baseline?: string;
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

const BUFFER_SOURCE = {
  server: "server's generation times",
  client: "client arrivals (no server timing)",
  mixed: "mixed (some requests without server timing)",
} as const;

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
    {
      label: "unread buffer measured from",
      better: "none",
      values: get(s, (x) => (x.bufferSource ? 0 : null)),
      format: num,
      text: s.map((x) => (x?.bufferSource ? BUFFER_SOURCE[x.bufferSource] : null)),
    },
    {
      label: "effective tokens, server's count (of tokens generated)",
      better: "none",
      values: get(v, (x) => x.effectiveTokens),
      format: num,
      text: v.map((m) =>
        m?.effectiveTokens == null
          ? null
          : `${m.effectiveTokens.toFixed(1)} (of ${m.tokensGenerated ?? "?"})`
      ),
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
      label: "SLO goodput (requests meeting both SLOs)",
      better: "higher",
      values: get(s, (x) => x.sloGoodput),
      format: pct,
      text: s.map((x) =>
        x?.sloGoodput == null ? null : `${pct(x.sloGoodput)} (${x.sloGoodRequests})`
      ),
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
      label: "paused requests, peak",
      better: "none",
      values: get(v, (x) => x.peakPaused),
      format: num,
    },
    {
      label: "recomputed tokens",
      better: "lower",
      values: get(v, (x) => x.recomputedTokens),
      format: num,
    },
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

/** The baseline's name: the one asked for, else a configuration named `fcfs`, else none. */
export function baselineName(results: ConfigResult[], asked?: string): string | null {
  if (asked !== undefined) return asked;
  return results.some((r) => r.config.name === "fcfs") ? "fcfs" : null;
}

/** One goal: how a configuration's value compares with the baseline's, and whether it is met. */
interface Goal {
  label: string;
  target: string;
  /** The cell for `c` against baseline `b`: text, and met (null: cannot be judged). */
  judge(c: ConfigResult, b: ConfigResult): { text: string; met: boolean | null };
  /** The baseline's own value. */
  baseline(b: ConfigResult): string;
}

const SERVED_OUTCOMES = new Set(["refused", "failed", "timeout"]);

/** A ratio goal: value(c) / value(b) against a bound; a zero baseline is met only by zero. */
function ratioGoal(
  label: string,
  value: (r: ConfigResult) => number | null,
  bound: number,
  atMost: boolean,
  unit: (v: number) => string,
): Goal {
  return {
    label,
    target: `${atMost ? "≤" : "≥"} ${bound}×`,
    baseline(b) {
      const y = value(b);
      return y === null ? "—" : unit(y);
    },
    judge(c, b) {
      const x = value(c);
      const y = value(b);
      if (x === null || y === null) return { text: "—", met: null };
      if (y === 0) {
        const met = atMost ? x === 0 : x > 0;
        return { text: `${unit(x)} vs ${unit(y)}`, met };
      }
      const ratio = x / y;
      return {
        text: `${ratio.toFixed(2)}× (${unit(x)})`,
        met: atMost ? ratio <= bound : ratio >= bound,
      };
    },
  };
}

const GOALS: Goal[] = [
  ratioGoal(
    "TTFT p99",
    (r) => r.summary?.ttftMs.p99 ?? null,
    0.5,
    true,
    (v) => `${(v / 1000).toFixed(2)} s`,
  ),
  ratioGoal(
    "effective tokens/s",
    (r) => r.summary?.effectiveTokensPerS ?? null,
    1.5,
    false,
    (v) => v.toFixed(1),
  ),
  ratioGoal(
    "stall time, total",
    (r) => r.summary?.stallTotalS ?? null,
    0.25,
    true,
    (v) => `${sec(v)} s`,
  ),
  {
    label: "TBT SLO attainment",
    target: "≥ 90%",
    baseline(b) {
      const a = b.summary?.tbtAttainment ?? null;
      return a === null ? "—" : pct(a);
    },
    judge(c) {
      const a = c.summary?.tbtAttainment ?? null;
      return a === null ? { text: "—", met: null } : { text: pct(a), met: a >= 0.9 };
    },
  },
  ratioGoal(
    "raw tokens/s",
    (r) => r.summary?.rawTokensPerS ?? null,
    0.9,
    false,
    (v) => v.toFixed(1),
  ),
  {
    label: "refused or failed that the baseline served",
    target: "0",
    baseline: () => "—",
    judge(c, b) {
      const served = new Set(b.records.filter((r) => r.outcome === "ok").map((r) => r.id));
      const lost = c.records.filter((r) => served.has(r.id) && SERVED_OUTCOMES.has(r.outcome));
      return { text: String(lost.length), met: lost.length === 0 };
    },
  },
];

/**
 * "Goals against the baseline": per configuration other than the baseline, each goal's value and
 * whether it is met. Lines of Markdown; a note instead when there is no baseline to judge against.
 */
export function goalsTable(results: ConfigResult[], asked?: string): string[] {
  const name = baselineName(results, asked);
  if (name === null) {
    return [
      "No baseline: name one with `--baseline NAME` (the default is a configuration named `fcfs`).",
    ];
  }
  const base = results.find((r) => r.config.name === name);
  if (!base) return [`The baseline \`${name}\` is not one of the configurations.`];
  if (!base.summary) {
    return [`The baseline \`${name}\` could not be measured, so no goal can be judged.`];
  }
  const others = results.filter((r) => r !== base);
  if (others.length === 0) return [`Only the baseline \`${name}\` ran: nothing to compare.`];
  const cell = (g: Goal, c: ConfigResult) => {
    if (!c.summary) return "not measured";
    const { text, met } = g.judge(c, base);
    return met === null ? text : `${text} ${met ? "met" : "**not met**"}`;
  };
  const met = others.map((c) =>
    c.summary ? GOALS.filter((g) => g.judge(c, base).met === true).length : 0
  );
  return [
    `Each configuration against \`${name}\`: ratios are configuration ÷ baseline.`,
    "",
    `| goal | target | \`${name}\` (baseline) | ${
      others.map((r) => `\`${r.config.name}\``).join(" | ")
    } |`,
    `|---|---|---:|${others.map(() => "---:").join("|")}|`,
    ...GOALS.map((g) =>
      `| ${g.label} | ${g.target} | ${g.baseline(base)} | ${
        others.map((c) => cell(g, c)).join(" | ")
      } |`
    ),
    `| **goals met** | | | ${met.map((n) => `${n} of ${GOALS.length}`).join(" | ")} |`,
  ];
}

export function buildReport(input: ReportInput): Report {
  const { results } = input;
  const svgs = new Map<string, string>();
  svgs.set("ttft_cdf.svg", ttftCdfChart(results));
  if (results.some((r) => r.server?.kvBlocks.length)) svgs.set("kv_blocks.svg", kvChart(results));
  // Per configuration: its buffer plot, and its KV plot when the server reported KV blocks.
  const fileFor = (prefix: string, config: string) => {
    let name = `${prefix}_${slug(config)}.svg`;
    for (let k = 2; svgs.has(name); k++) name = `${prefix}_${slug(config)}_${k}.svg`;
    return name;
  };
  const perConfig: string[] = [];
  for (const r of results) {
    const n = r.config.name;
    perConfig.push(`### \`${n}\``, "");
    if (r.records.length === 0) {
      perConfig.push(`No requests were measured${r.error ? " (it could not be run)" : ""}.`, "");
      continue;
    }
    const buffer = fileFor("buffer", n);
    svgs.set(buffer, bufferChart(r));
    perConfig.push(`![unread buffer, ${n}](${buffer})`, "");
    if (r.server?.kvBlocks.length) {
      const kv = fileFor("kv", n);
      svgs.set(kv, kvChart([r], `KV blocks used per tier — ${n}`));
      perConfig.push(`![KV blocks per tier, ${n}](${kv})`, "");
    }
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
    "## Goals against the baseline",
    "",
    ...goalsTable(results, input.baseline),
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
    ...perConfig,
    "## How the numbers are defined",
    "",
    "- Each client plays its stream to a reader at the request's reading rate: the first token is read on " +
    "arrival, then one token every 1/rate s; a token not there yet is a **stall** (time reading waits). " +
    "TTFT, time between tokens, stalls and SLO attainment are measured at the client, on arrivals.",
    "- The **unread buffer** of a request holds the tokens generated but not yet read: a token enters it " +
    "when the server generated it (Sluice reports each token's generation time with " +
    "`stream_options.include_timing`) and leaves it when the reader reads it. A server that paces its " +
    "streams keeps this buffer on its side, so arrivals at the client alone would show it empty; for a " +
    "server that reports no generation times, a token enters at its arrival instead (the row " +
    '"unread buffer measured from" says which).',
    "- **Effective tokens/s** (TokenFlow): a token counts fully if, when it is generated, the request's " +
    "unread buffer holds at most 10% of the request's received output, linearly less up to 20%, not at " +
    "all above; divided by the run span. Raw tokens/s divides all tokens by the same span. The server's " +
    "own count (`sluice_effective_tokens_total`, from its token buffer at each deposit) is shown beside it.",
    "- **TBT attainment**: share of gaps between consecutive tokens within the request's TBT SLO (token level). " +
    "**TPOT attainment**: share of requests (with ≥ 2 tokens) whose mean time per output token is within it. " +
    "**TTFT attainment**: share of requests (that asked for tokens) whose first token came within the TTFT " +
    "SLO; refused and failed requests count as misses. **SLO goodput**: share of those requests that " +
    "met both: ended as asked (ok, or hung up as the workload said), TTFT within its SLO, and TPOT within " +
    "the TBT SLO (a request with one token: its TTFT alone).",
    "- **Goals**: each configuration ÷ the baseline for TTFT p99, effective and raw tokens/s and total " +
    "stall time; TBT attainment as measured; and the requests the baseline served (ok) that this " +
    "configuration refused, failed or timed out. A zero baseline is met only by zero (stalls).",
    "- **Recomputed tokens**: prefill rows of positions a request had computed before (its KV was lost to " +
    "a preemption). **Paused requests, peak**: the most requests preempted at once, at the /metrics scrapes.",
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
