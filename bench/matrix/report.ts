// The matrix report: one summary table per compared configuration (a row per cell: its ratios to
// the baseline, each goal met or not), then per cell the workload, every configuration's raw
// figures and the goals. Pure: runs in, Markdown out.

import type { ConfigResult } from "../serve/run.ts";
import { type Cell, describeCell, underPressure } from "./cells.ts";
import {
  type CellVerdict,
  type Figures,
  figuresOf,
  type GoalResult,
  judgeCell,
  type Metric,
  METRICS,
  STALL_FLOOR_S,
} from "./goals.ts";

export interface CellRun {
  cell: Cell;
  budgetMb: number;
  /** The context the workload was bounded by (undefined: not known). */
  maxContext?: number;
  requests: number;
  promptTokens: number;
  outputTokens: number;
  /** The cell's folder, relative to the report. */
  folder: string;
  results: ConfigResult[];
}

export interface MatrixInput {
  title: string;
  context: string[];
  baseline: string;
  runs: CellRun[];
  reproduce: string;
}

const pct = (v: number) => `${(v * 100).toFixed(1)}%`;

/** A figure as the tables show it. */
export function formatFigure(key: Metric, v: number | null): string {
  if (v === null) return "—";
  switch (key) {
    case "ttftP99Ms":
      return `${(v / 1000).toFixed(2)} s`;
    case "ttftAttainment":
    case "tbtAttainment":
    case "sloGoodput":
      return pct(v);
    case "stallTotalS":
      return `${v >= 10 ? v.toFixed(1) : v.toFixed(2)} s`;
    case "rawTokensPerS":
      return v.toFixed(1);
    case "preemptions":
      return String(v);
  }
}

/** candidate ÷ baseline as "0.83×", or both values when the baseline's is zero or missing. */
export function formatRatio(key: Metric, c: number | null, b: number | null): string {
  if (c === null || b === null) return "—";
  if (b === 0) return `${formatFigure(key, c)} vs ${formatFigure(key, b)}`;
  return `${(c / b).toFixed(2)}×`;
}

const mark = (g: GoalResult | undefined) =>
  g === undefined
    ? ""
    : g.na !== undefined
    ? " (n/a)"
    : g.met === null
    ? " (—)"
    : g.met
    ? " ✓"
    : " ✗";

interface Judged {
  run: CellRun;
  base: Figures | null;
  /** Per compared configuration: figures and verdict (null: it or the baseline not measured). */
  others: { name: string; figures: Figures | null; verdict: CellVerdict | null }[];
}

function judge(run: CellRun, baseline: string): Judged {
  const b = run.results.find((r) => r.config.name === baseline);
  const base = b ? figuresOf(b) : null;
  const others = run.results.filter((r) => r !== b).map((r) => {
    const figures = figuresOf(r);
    return {
      name: r.config.name,
      figures,
      verdict: figures && base ? judgeCell(figures, base, underPressure(run.cell)) : null,
    };
  });
  return { run, base, others };
}

/** The summary for one compared configuration: a row per cell. */
function summaryTable(judged: Judged[], name: string, baseline: string): string[] {
  const cols = METRICS.map((m) => m.label);
  const out = [
    `#### \`${name}\` ÷ \`${baseline}\``,
    "",
    `| cell | pressure | ${cols.join(" | ")} | pressure goal | all goals |`,
    `|---|:-:|${cols.map(() => "---:").join("|")}|:-:|:-:|`,
  ];
  let met = 0;
  for (const j of judged) {
    const o = j.others.find((x) => x.name === name);
    const pressure = underPressure(j.run.cell) ? "yes" : "";
    if (!o?.verdict || !o.figures || !j.base) {
      const why = !j.base ? `\`${baseline}\` not measured` : "not measured";
      out.push(
        `| ${j.run.cell.id} | ${pressure} | ${cols.map(() => "—").join(" | ")} | | ${why} |`,
      );
      continue;
    }
    const goal = (id: GoalResult["id"]) => o.verdict!.goals.find((g) => g.id === id);
    const goalOf: Partial<Record<Metric, GoalResult["id"]>> = {
      ttftP99Ms: "ttft-p99",
      sloGoodput: "goodput",
      stallTotalS: "stall",
      rawTokensPerS: "raw",
    };
    const cells = METRICS.map(({ key }) => {
      const g = goalOf[key];
      const ratio = key === "preemptions"
        ? `${formatFigure(key, o.figures![key])} vs ${formatFigure(key, j.base![key])}`
        : formatRatio(key, o.figures![key], j.base![key]);
      return ratio + (g ? mark(goal(g)) : "");
    });
    if (o.verdict.allMet) met++;
    const p = goal("pressure");
    out.push(
      `| ${j.run.cell.id} | ${pressure} | ${cells.join(" | ")} | ${p ? mark(p).trim() : ""} | ${
        o.verdict.allMet ? "**met**" : "not met"
      } |`,
    );
  }
  out.push("", `All goals met in ${met} of ${judged.length} cells.`);
  return out;
}

function cellSection(j: Judged, baseline: string): string[] {
  const { run } = j;
  const c = run.cell;
  const results = run.results;
  const out = [
    `### ${c.id}${underPressure(c) ? " (under memory pressure)" : ""}`,
    "",
    `- Workload: ${describeCell(c, run.budgetMb)}.`,
    `- ${run.requests} requests, ${run.promptTokens} prompt and ${run.outputTokens} output tokens; ` +
    `prompt + output bounded by a context of ${run.maxContext ?? "— (not known)"} tokens.`,
    `- Files: [\`${run.folder}/\`](${run.folder}/report.md) (the serving report with plots, ` +
    "workload.jsonl, raw results and server logs).",
    ...results.filter((r) => r.error).map((r) =>
      `- \`${r.config.name}\` could not be measured: ${r.error!.split("\n")[0]}`
    ),
    "",
    `| figure | ${results.map((r) => `\`${r.config.name}\``).join(" | ")} | ${
      j.others.map((o) => `\`${o.name}\` ÷ \`${baseline}\``).join(" | ")
    } |`,
    `|---|${results.map(() => "---:").join("|")}|${j.others.map(() => "---:").join("|")}|`,
  ];
  for (const { key, label } of METRICS) {
    const values = results.map((r) => formatFigure(key, figuresOf(r)?.[key] ?? null));
    const ratios = j.others.map((o) =>
      formatRatio(key, o.figures?.[key] ?? null, j.base?.[key] ?? null)
    );
    out.push(`| ${label} | ${values.join(" | ")} | ${ratios.join(" | ")} |`);
  }
  out.push("");
  const judgedOthers = j.others.filter((o) => o.verdict);
  if (judgedOthers.length === 0) return [...out, "No goal can be judged: a run is missing.", ""];
  const goals = judgedOthers[0].verdict!.goals;
  out.push(
    `| goal | target | ${judgedOthers.map((o) => `\`${o.name}\``).join(" | ")} |`,
    `|---|---|${judgedOthers.map(() => ":-:").join("|")}|`,
    ...goals.map((g, i) =>
      `| ${g.label} | ${g.target} | ${
        judgedOthers.map((o) => {
          const r = o.verdict!.goals[i];
          return r.na ?? (r.met === null ? "—" : r.met ? "met" : "**not met**");
        }).join(" | ")
      } |`
    ),
    "",
  );
  return out;
}

export function matrixReport(input: MatrixInput): string {
  const judged = input.runs.map((r) => judge(r, input.baseline));
  const names = [
    ...new Set(input.runs.flatMap((r) => r.results.map((x) => x.config.name))),
  ].filter((n) => n !== input.baseline);
  const configs =
    input.runs[0]?.results.map((r) =>
      `- \`${r.config.name}\`${r.config.name === input.baseline ? " (baseline)" : ""}: \`${
        r.config.flags.filter((_, i, f) => f[i] !== "--gpu-kv-mb" && f[i - 1] !== "--gpu-kv-mb")
          .join(" ") || "(server defaults)"
      }\` and the cell's \`--gpu-kv-mb\``
    ) ?? [];
  return [
    `# ${input.title}`,
    "",
    ...input.context.map((c) => `- ${c}`),
    "",
    "Configurations:",
    "",
    ...configs,
    "",
    "## Summary",
    "",
    `Per cell, each configuration ÷ \`${input.baseline}\` (preemptions: both counts); ✓/✗ mark ` +
    "the goals of every cell, the pressure goal those of the cells under memory pressure.",
    "",
    ...names.flatMap((n) => [...summaryTable(judged, n, input.baseline), ""]),
    "## Cells",
    "",
    ...judged.flatMap((j) => cellSection(j, input.baseline)),
    "## Rules",
    "",
    "- **SLO goodput**: the share of requests (that asked for tokens) that ended as asked (the " +
    "stream completed, or the reader hung up as the workload said), got their first token within " +
    "their TTFT SLO, and whose time per output token (TPOT, the serving report's request-level TBT " +
    "judgement: last arrival − first, over tokens − 1) is within their TBT SLO; a request with one " +
    "token is judged by its TTFT alone. Refused, failed and timed-out requests count as misses.",
    "- **TBT SLO attainment**: the share of all gaps between consecutive tokens within their " +
    "request's TBT SLO (token level), as in the serving report. **TTFT SLO attainment**: the share of " +
    "requests whose first token came within their TTFT SLO.",
    "- **Under memory pressure**: the cells with the tight budget. Their extra goal: SLO goodput ≥ 1.5× " +
    "or total stall ≤ 0.25×, and TTFT p99 ≤ 0.8×.",
    `- **Goals in every cell**: TTFT p99 ≤ 1.05×, SLO goodput ≥ 1.0×, raw tokens/s ≥ 0.95×, total ` +
    `stall ≤ 0.5× where the baseline's readers stalled more than ${STALL_FLOOR_S} s in all (n/a ` +
    "elsewhere). Ratios are compared as x ≤ bound × baseline, so a zero baseline is judged too: an " +
    "upper bound is then met by zero only, a lower bound of 1.0× always, a higher one by anything " +
    "above zero. A goal whose figure is missing (—) counts as not met.",
    "- **Stall**: the time readers waited for a token not yet there, summed over requests (the " +
    "serving report's playout). Unpaced readers read at 1000 tokens/s, so every wait is a stall.",
    "",
    "## Reproduce",
    "",
    "```",
    input.reproduce,
    "```",
    "",
  ].join("\n");
}
