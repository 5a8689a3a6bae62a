// `bench speed`'s goals table (issue 22's "Must show"): each figure computed from the benches'
// typed results — never from their Markdown — set against its goal as met, not met, or not
// measured (a section skipped or failed). Pure, so it is tested on its own
// (tests/bench/speed_goals_test.ts).

import type { DecodeResult } from "./decode.ts";
import { type DecodeQuantResult, quantRatio } from "./decode_quant.ts";
import type { MatvecCell, MatvecResult } from "./kernels.ts";
import { type ReportInput, roundRatios, spread } from "./llamacpp.ts";
import { type StepSplitResult, weightIndependentByRemoval } from "./step_split.ts";
import { type StepTiming, weightKernelsMs } from "./step_timing.ts";

/** A section that did not run: skipped by a flag, or failed, and why. */
export interface NotRun {
  notRun: string;
}

/** Every section's result, or why it has none. */
export interface SpeedResults {
  decode: DecodeResult | NotRun;
  quant: DecodeQuantResult | NotRun;
  stepSplit: StepSplitResult | NotRun;
  matvec: MatvecResult | NotRun;
  llamacpp: ReportInput | NotRun;
}

export interface Goal {
  comparison: "at least" | "at most";
  target: number;
}

/** One scorecard row. */
export interface Figure {
  what: string;
  /** Null: not measured. */
  value: number | null;
  /** How the value reads: a ratio (×), a share (a fraction shown as %), or a count. */
  unit: "×" | "%" | "count" | "GB/s";
  /** Absent: a figure reported with no goal. */
  goal?: Goal;
  /** How it was measured, or why it was not. */
  note: string;
}

export type Verdict = "met" | "not met" | "not measured" | "no goal";

export function verdict(f: Figure): Verdict {
  if (f.value === null || !Number.isFinite(f.value)) return "not measured";
  if (!f.goal) return "no goal";
  const { comparison, target } = f.goal;
  return (comparison === "at least" ? f.value >= target : f.value <= target) ? "met" : "not met";
}

function show(value: number, unit: Figure["unit"]): string {
  if (unit === "%") return `${(100 * value).toFixed(0)}%`;
  if (unit === "×") return `${value.toFixed(2)}×`;
  if (unit === "GB/s") return `${value.toFixed(2)} GB/s`;
  return String(Math.round(value));
}

/** The goals table: one row per figure, with its goal and verdict. */
export function goalsTable(figures: Figure[]): string[] {
  const rows = figures.map((f) => {
    const v = verdict(f);
    const measured = v === "not measured" ? "—" : show(f.value!, f.unit);
    const goal = f.goal
      ? `${f.goal.comparison === "at least" ? "≥" : "≤"} ${show(f.goal.target, f.unit)}`
      : "—";
    const mark = v === "met" ? "**met**" : v === "no goal" ? "reported" : v;
    return `| ${f.what} | ${measured} | ${goal} | ${mark} | ${f.note} |`;
  });
  const count = (v: Verdict) => figures.filter((f) => verdict(f) === v).length;
  const withGoal = figures.filter((f) => f.goal).length;
  return [
    "| figure | measured | goal | verdict | how |",
    "|---|---|---|---|---|",
    ...rows,
    "",
    `Goals met: ${count("met")} of ${withGoal}` +
    (count("not measured") ? ` (${count("not measured")} not measured)` : "") + ".",
  ];
}

const ran = <T extends object>(r: T | NotRun): r is T => !("notRun" in r);
const missing = (what: string, unit: Figure["unit"], note: string, goal?: Goal): Figure => ({
  what,
  value: null,
  unit,
  goal,
  note,
});

/**
 * The part of a step that does not depend on the weights, from its timestamp split: one less the
 * weight kernels' share. A pass per timed kernel costs time of its own, so where the kernels' sum
 * exceeds the untimed step, the share is of that sum (as the split's table reads), not of the step.
 */
export function weightIndependentShare(t: StepTiming): number {
  const kernels = [...t.kindMs.values()].reduce((a, b) => a + b, 0);
  return 1 - weightKernelsMs(t) / Math.max(t.stepMs, kernels);
}

/**
 * A matvec cell's share of the better read roofline: for each weight layout (storage, texture),
 * the median over rounds of the kernel's GB/s over the faster roofline's in the same round; the
 * better layout's, as an adapter's own kernel choice would take it.
 */
export function matvecBestShare(c: MatvecCell): { share: number; layout: "storage" | "texture" } {
  const roof = c.storageRoofline.map((s, i) => Math.max(s, c.textureRoofline[i]));
  const of = (k: number[]) => spread(k.map((v, i) => v / roof[i])).median;
  const storage = of(c.storageKernel), texture = of(c.textureKernel);
  return storage >= texture
    ? { share: storage, layout: "storage" }
    : { share: texture, layout: "texture" };
}

const AT_LEAST = (target: number): Goal => ({ comparison: "at least", target });

/**
 * Issue 33's figures: the integer-dot kernels (--quant-kernels int) against f16 — Q4_0 at batch 1
 * (≥ 2×) and 16 (≥ 1×), Q4_K_M at batch 1 (≥ 1.8×) — and the weight bytes a batch-1 decode step
 * reads per second (every weight buffer once per token: weight bytes × tokens/s), float and int
 * kernels, for Q4_0 and Q4_K_M: the matvecs' effective GB/s inside the whole step.
 */
export function intKernelFigures(r: SpeedResults): Figure[] {
  const figures: Figure[] = [];
  const goals: [string, 1 | 16, number][] = [["q4_0", 1, 2], ["q4_0", 16, 1], ["q4_k_m", 1, 1.8]];
  for (const [kind, batch, target] of goals) {
    const what = `decode tokens/s, ${kind.toUpperCase()} int kernels ÷ f16, batch ${batch}`;
    const goal = AT_LEAST(target);
    if (!ran(r.quant)) {
      figures.push(missing(what, "×", r.quant.notRun, goal));
      continue;
    }
    if (!(r.quant.intKinds ?? []).includes(kind as never)) {
      figures.push(missing(what, "×", `${kind} not measured with the int kernels`, goal));
      continue;
    }
    const ratio = quantRatio(r.quant, `${kind} int`, batch);
    const float = quantRatio(r.quant, kind, batch);
    figures.push(
      ratio === null ? missing(what, "×", "no round with both", goal) : {
        what,
        value: ratio,
        unit: "×",
        goal,
        note: `median of ${r.quant.rounds} per-round ratios; float kernels: ${
          float === null ? "—" : `${float.toFixed(2)}×`
        }`,
      },
    );
  }
  if (ran(r.quant)) {
    const q = r.quant;
    for (const kind of q.intKinds ?? []) {
      for (const key of [kind, `${kind} int`]) {
        const t = q.tokensPerS[key]?.[1];
        if (!t?.length) continue;
        const sorted = [...t].sort((a, b) => a - b);
        const tokS = sorted[sorted.length >> 1];
        figures.push({
          what: `${kind} ${
            key.includes("int") ? "int" : "float"
          } kernels: batch-1 decode weight GB/s`,
          value: (q.weightBytes[key] * tokS) / 1e9,
          unit: "GB/s",
          note: `weight bytes × tokens/s (${tokS.toFixed(2)}), the whole step's time`,
        });
      }
    }
  }
  // The matvec kernels alone (bench kernels' cells): float (its better layout) and int, GB/s of
  // weight bytes, each the median over shapes of the per-shape medians over rounds.
  if (ran(r.matvec)) {
    const mv = r.matvec;
    mv.formats.forEach((format, i) => {
      const cells = mv.rows.flatMap((row) => (row.cells[i]?.intKernel ? [row.cells[i]!] : []));
      if (cells.length === 0) return;
      const mid = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
      const float = mid(cells.map((c) => Math.max(mid(c.storageKernel), mid(c.textureKernel))));
      const int = mid(cells.map((c) => mid(c.intKernel!)));
      const over = `median over ${cells.length} shape${cells.length > 1 ? "s" : ""}`;
      figures.push(
        {
          what: `${format} matvec GB/s, float kernel (better layout)`,
          value: float,
          unit: "GB/s",
          note: over,
        },
        {
          what: `${format} matvec GB/s, int kernels (quantize_x + matmul_int)`,
          value: int,
          unit: "GB/s",
          note: `${over}; ${(int / float).toFixed(2)}× the float kernel's`,
        },
      );
    });
  }
  return figures;
}

/** Issue 22's scorecard figures from the sections' results. */
export function scorecardFigures(r: SpeedResults): Figure[] {
  const figures: Figure[] = [];

  // Decode: multi-step against k = 1, and batch 16 against batch 1.
  const multiWhat = "batch-1 decode, multi-step ÷ one step per submission (k = 1)";
  const batchWhat = "decode tokens/s, batch 16 ÷ batch 1";
  if (ran(r.decode)) {
    const at = (b: number) => (r.decode as DecodeResult).batches.find((x) => x.batch === b);
    const b1 = at(1), b16 = at(16);
    figures.push(
      b1
        ? {
          what: multiWhat,
          value: b1.multi.tokensPerS / b1.single.tokensPerS,
          unit: "×",
          goal: AT_LEAST(1.3),
          note: `${b1.multi.tokensPerS.toFixed(1)} against ${
            b1.single.tokensPerS.toFixed(1)
          } tokens/s, up to ${r.decode.decodeSteps} steps per submission`,
        }
        : missing(multiWhat, "×", "no batch-1 run", AT_LEAST(1.3)),
      b1 && b16
        ? {
          what: batchWhat,
          value: b16.multi.tokensPerS / b1.multi.tokensPerS,
          unit: "×",
          goal: AT_LEAST(8),
          note: `multi-step, as serving runs: ${b16.multi.tokensPerS.toFixed(1)} against ${
            b1.multi.tokensPerS.toFixed(1)
          } tokens/s; one step per submission: ${
            (b16.single.tokensPerS / b1.single.tokensPerS).toFixed(2)
          }×`,
        }
        : missing(batchWhat, "×", "no batch-1 or batch-16 run", AT_LEAST(8)),
    );
  } else {
    figures.push(
      missing(multiWhat, "×", r.decode.notRun, AT_LEAST(1.3)),
      missing(batchWhat, "×", r.decode.notRun, AT_LEAST(8)),
    );
  }

  // The weight-independent part of a batch-1 f16 step, from GPU timestamps (the decode bench's
  // split) and by removal (the step split). The two methods disagree on this adapter, so the
  // figure is the larger of those measured: the goal is met only if every method says so.
  const fixedWhat = "weight-independent part of a batch-1 f16 step";
  const fixedGoal: Goal = { comparison: "at most", target: 0.25 };
  const stamped = ran(r.decode) ? r.decode.split?.find((t) => t.batch === 1) : undefined;
  const removal = ran(r.stepSplit) ? weightIndependentByRemoval(r.stepSplit) : null;
  const estimates: { value: number; note: string }[] = [];
  if (stamped) {
    const share = weightIndependentShare(stamped);
    estimates.push({
      value: share,
      note: `GPU timestamps ${(100 * share).toFixed(0)}% (weight kernels ${
        weightKernelsMs(stamped).toFixed(2)
      } ms of a ${stamped.stepMs.toFixed(2)} ms step, or of the timed kernels' sum where larger)`,
    });
  }
  if (removal) {
    const share = removal.independentMs / removal.stepMs;
    estimates.push({
      value: share,
      note: `removal ${(100 * share).toFixed(0)}% (whole step ${
        removal.stepMs.toFixed(2)
      } ms less weights and LM head ${removal.weightsMs.toFixed(2)} ms)`,
    });
  }
  if (estimates.length > 0) {
    const worst = estimates.reduce((a, b) => (b.value > a.value ? b : a));
    figures.push({
      what: fixedWhat,
      value: worst.value,
      unit: "%",
      goal: fixedGoal,
      note: `the larger of: ${estimates.map((e) => e.note).join("; ")}`,
    });
  } else {
    const why = [r.decode, r.stepSplit].map((x) => ("notRun" in x ? x.notRun : "")).filter(
      Boolean,
    );
    figures.push(
      missing(fixedWhat, "%", why.join("; ") || "no batch-1 step split", fixedGoal),
    );
  }

  // Q4_0 against f16.
  for (const batch of [1, 16] as const) {
    const what = `decode tokens/s, Q4_0 ÷ f16, batch ${batch}`;
    const goal = AT_LEAST(batch === 1 ? 2.5 : 1);
    if (!ran(r.quant)) {
      figures.push(missing(what, "×", r.quant.notRun, goal));
      continue;
    }
    const ratio = quantRatio(r.quant, "q4_0", batch);
    figures.push(
      ratio === null ? missing(what, "×", "q4_0 not among --quant", goal) : {
        what,
        value: ratio,
        unit: "×",
        goal,
        note: `median of ${r.quant.rounds} per-round ratios, ${r.quant.steps} steps each`,
      },
    );
  }

  figures.push(...intKernelFigures(r));

  // Each matvec format: its worst shape, each shape at its better layout, against the better
  // read roofline.
  if (ran(r.matvec) && r.matvec.formats.length === 0) {
    figures.push(
      missing("matvec ÷ the better read roofline", "%", "no format measured", AT_LEAST(0.9)),
    );
  } else if (ran(r.matvec)) {
    const mv = r.matvec;
    mv.formats.forEach((format, i) => {
      const what = `${format} matvec ÷ the better read roofline (worst shape)`;
      const cells = mv.rows.flatMap((row) => {
        const c = row.cells[i];
        return c ? [{ shape: row.shape, ...matvecBestShare(c) }] : [];
      });
      if (cells.length === 0) {
        figures.push(missing(what, "%", "no shape with K in whole blocks", AT_LEAST(0.9)));
        return;
      }
      const worst = cells.reduce((a, b) => (b.share < a.share ? b : a));
      figures.push({
        what,
        value: worst.share,
        unit: "%",
        goal: AT_LEAST(0.9),
        note: `worst: ${worst.shape} (weights in ${worst.layout}); over ${cells.length} shapes`,
      });
    });
  } else {
    figures.push(
      missing("matvec ÷ the better read roofline", "%", r.matvec.notRun, AT_LEAST(0.9)),
    );
  }

  // Dispatches per step.
  const dispatchWhat = "dispatches per decode step";
  figures.push(
    ran(r.decode)
      ? {
        what: dispatchWhat,
        value: r.decode.dispatchesPerStep,
        unit: "count",
        note: `the engine's forward pass; ${r.decode.dispatchesPerStep + 1} in a decode group`,
      }
      : missing(dispatchWhat, "count", r.decode.notRun),
  );

  // Against llama.cpp's CPU path, at its fewest threads.
  if (ran(r.llamacpp)) {
    const lc = r.llamacpp;
    const threads = Math.min(...lc.threads);
    for (const kind of lc.kinds) {
      const what = `batch-1 decode ÷ llama.cpp CPU (${threads} thread${
        threads > 1 ? "s" : ""
      }), ${kind}`;
      const ratios = roundRatios(lc.results, kind, threads, "decode");
      figures.push(
        ratios.length === 0 ? missing(what, "×", "no round with both engines", AT_LEAST(1)) : {
          what,
          value: spread(ratios).median,
          unit: "×",
          goal: AT_LEAST(1),
          note: `median of ${ratios.length} per-round ratios, same GGUF file`,
        },
      );
    }
  } else {
    figures.push(missing("batch-1 decode ÷ llama.cpp CPU", "×", r.llamacpp.notRun, AT_LEAST(1)));
  }
  return figures;
}
