// Issue 19's goals for one cell: a configuration's figures against the baseline's (fcfs as vLLM
// V1 runs it), as ratios, each goal met or not. Pure: figures in, verdicts out.
//
// Every cell: TTFT p99 <= 1.05x, SLO goodput >= 1.0x, raw tokens/s >= 0.95x, and total stall
// <= 0.5x where the baseline stalled over 1 s in all (elsewhere not applicable). Cells under
// memory pressure also: (SLO goodput >= 1.5x or stall <= 0.25x) and TTFT p99 <= 0.8x.
// Ratios are compared without dividing (x <= b * y), so a zero baseline is judged too: a bound of
// at most is met by zero only, a bound of at least 1.0x always, one above 1.0x only by x > 0.

import type { ConfigResult } from "../serve/run.ts";

/** What a cell's goals read from one configuration's run; null: not measured. */
export interface Figures {
  ttftP99Ms: number | null;
  ttftAttainment: number | null;
  tbtAttainment: number | null;
  sloGoodput: number | null;
  stallTotalS: number | null;
  rawTokensPerS: number | null;
  preemptions: number | null;
}

export type Metric = keyof Figures;

export const METRICS: { key: Metric; label: string }[] = [
  { key: "ttftP99Ms", label: "TTFT p99" },
  { key: "ttftAttainment", label: "TTFT SLO attainment" },
  { key: "tbtAttainment", label: "TBT SLO attainment" },
  { key: "sloGoodput", label: "SLO goodput" },
  { key: "stallTotalS", label: "stall, total" },
  { key: "rawTokensPerS", label: "raw tokens/s" },
  { key: "preemptions", label: "preemptions" },
];

export function figuresOf(r: ConfigResult): Figures | null {
  const s = r.summary;
  if (!s) return null;
  return {
    ttftP99Ms: s.ttftMs.p99,
    ttftAttainment: s.ttftAttainment,
    tbtAttainment: s.tbtAttainment,
    sloGoodput: s.sloGoodput,
    stallTotalS: s.stallTotalS,
    rawTokensPerS: s.rawTokensPerS,
    preemptions: r.server?.preemptions ?? null,
  };
}

/** x / y; null without both, or when y is 0 (the table shows both values then). */
export function ratio(x: number | null, y: number | null): number | null {
  return x === null || y === null || y === 0 ? null : x / y;
}

/** Rounding slack, so a value exactly at its bound (0.6 against 1.5 × 0.4) meets it. */
const SLACK = 1e-9;

/** x against `bound` times y, without dividing (see the header for a zero y). */
export function within(x: number, y: number, bound: number, atMost: boolean): boolean {
  if (atMost) return x <= bound * y * (1 + SLACK);
  return y === 0 ? bound <= 1 || x > 0 : x >= bound * y * (1 - SLACK);
}

/** Below this total stall (s) the baseline's readers barely waited: no stall goal. */
export const STALL_FLOOR_S = 1;

export interface GoalResult {
  id: "ttft-p99" | "goodput" | "stall" | "raw" | "pressure";
  label: string;
  target: string;
  /** true/false; null: not applicable (`na`) or a figure is missing. */
  met: boolean | null;
  na?: string;
}

export interface CellVerdict {
  ratios: Record<Metric, number | null>;
  goals: GoalResult[];
  /** Every applicable goal met (a missing figure is not met). */
  allMet: boolean;
}

function bounded(
  id: GoalResult["id"],
  label: string,
  x: number | null,
  y: number | null,
  bound: number,
  atMost: boolean,
): GoalResult {
  const target = `${atMost ? "≤" : "≥"} ${bound}×`;
  return { id, label, target, met: x === null || y === null ? null : within(x, y, bound, atMost) };
}

/** The goals of one cell for `c` against the baseline `b`. */
export function judgeCell(c: Figures, b: Figures, pressure: boolean): CellVerdict {
  const ratios = Object.fromEntries(
    METRICS.map(({ key }) => [key, ratio(c[key], b[key])]),
  ) as Record<Metric, number | null>;
  const goals: GoalResult[] = [
    bounded("ttft-p99", "TTFT p99", c.ttftP99Ms, b.ttftP99Ms, 1.05, true),
    bounded("goodput", "SLO goodput", c.sloGoodput, b.sloGoodput, 1.0, false),
    b.stallTotalS !== null && b.stallTotalS <= STALL_FLOOR_S
      ? {
        id: "stall",
        label: "stall, total",
        target: "≤ 0.5×",
        met: null,
        na: `baseline stalled ≤ ${STALL_FLOOR_S} s`,
      }
      : bounded("stall", "stall, total", c.stallTotalS, b.stallTotalS, 0.5, true),
    bounded("raw", "raw tokens/s", c.rawTokensPerS, b.rawTokensPerS, 0.95, false),
  ];
  if (pressure) goals.push(pressureGoal(c, b));
  return { ratios, goals, allMet: goals.every((g) => g.met === true || g.na !== undefined) };
}

/** Under memory pressure: (goodput >= 1.5x or stall <= 0.25x) and TTFT p99 <= 0.8x. */
function pressureGoal(c: Figures, b: Figures): GoalResult {
  const label = "under pressure: goodput or stall, and TTFT p99";
  const target = "(goodput ≥ 1.5× or stall ≤ 0.25×) and TTFT p99 ≤ 0.8×";
  const has = (x: number | null, y: number | null) => x !== null && y !== null;
  const goodput = has(c.sloGoodput, b.sloGoodput) &&
    within(c.sloGoodput!, b.sloGoodput!, 1.5, false);
  const stall = has(c.stallTotalS, b.stallTotalS) &&
    within(c.stallTotalS!, b.stallTotalS!, 0.25, true);
  const judged = has(c.sloGoodput, b.sloGoodput) || has(c.stallTotalS, b.stallTotalS);
  if (!has(c.ttftP99Ms, b.ttftP99Ms) || !judged) {
    return { id: "pressure", label, target, met: null };
  }
  const ttft = within(c.ttftP99Ms!, b.ttftP99Ms!, 0.8, true);
  return { id: "pressure", label, target, met: (goodput || stall) && ttft };
}
