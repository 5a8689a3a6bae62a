// Issue 31's goals for the default in one cell of the simulated matrix, against fcfs-vllm: TTFT
// p99 ≤ 1.0×; SLO goodput ≥ 1.2× under memory pressure (a tight budget) and ≥ 1.0× elsewhere;
// total stall ≤ 0.5× where fcfs-vllm stalled over 1 s in all. They are stricter than issue 19's
// for the real matrix (bench/matrix/goals.ts), whose comparison (`within`) and stall floor they
// share. Pure: summaries in, verdicts out.

import type { RunSummary } from "../bench/serve/metrics.ts";
import { STALL_FLOOR_S, within } from "../bench/matrix/goals.ts";

export interface Goal31 {
  id: "ttft-p99" | "goodput" | "stall";
  target: string;
  /** c ÷ b; null where b is 0 or missing. */
  ratio: number | null;
  /** true/false; null: not applicable (fcfs-vllm barely stalled) or a figure is missing. */
  met: boolean | null;
}

const ratioOf = (c: number | null, b: number | null) =>
  c === null || b === null || b === 0 ? null : c / b;

function goal(
  id: Goal31["id"],
  c: number | null,
  b: number | null,
  bound: number,
  atMost: boolean,
): Goal31 {
  return {
    id,
    target: `${atMost ? "≤" : "≥"} ${bound.toFixed(1)}×`,
    ratio: ratioOf(c, b),
    met: c === null || b === null ? null : within(c, b, bound, atMost),
  };
}

/** The three goals of candidate `c` against baseline `b`; `pressure`: the cell's budget is tight. */
export function judge31(c: RunSummary, b: RunSummary, pressure: boolean): Goal31[] {
  const stall = b.stallTotalS <= STALL_FLOOR_S
    ? {
      id: "stall" as const,
      target: "≤ 0.5×",
      ratio: ratioOf(c.stallTotalS, b.stallTotalS),
      met: null,
    }
    : goal("stall", c.stallTotalS, b.stallTotalS, 0.5, true);
  return [
    goal("ttft-p99", c.ttftMs.p99, b.ttftMs.p99, 1.0, true),
    goal("goodput", c.sloGoodput, b.sloGoodput, pressure ? 1.2 : 1.0, false),
    stall,
  ];
}

/** "✓", "✗", or "n/a" (not applicable) / "—" (a figure missing). */
export function mark(g: Goal31, applicable = true): string {
  if (g.met === null) return g.id === "stall" && applicable ? "n/a" : "—";
  return g.met ? "✓" : "✗";
}
