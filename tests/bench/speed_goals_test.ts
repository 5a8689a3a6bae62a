// `bench speed`'s goals table on hand-made results (no GPU, no llama.cpp): each figure is the
// ratio or share its goal names, computed from the typed results; met and not met on either side
// of a goal (at least, at most, exactly at the target); a skipped or failed section gives "not
// measured" rows with its reason, never a number; the matvec share takes each shape's better
// layout against the faster roofline, per round, and the worst shape per format.

import {
  type Figure,
  goalsTable,
  matvecBestShare,
  scorecardFigures,
  type SpeedResults,
  verdict,
  weightIndependentShare,
} from "../../bench/speed_goals.ts";
import type { DecodeResult } from "../../bench/decode.ts";
import type { DecodeQuantResult } from "../../bench/decode_quant.ts";
import type { MatvecCell, MatvecResult } from "../../bench/kernels.ts";
import type { Measured, ReportInput } from "../../bench/llamacpp.ts";
import type { StepSplitResult } from "../../bench/step_split.ts";
import { assert, assertEquals, assertMatch } from "../helpers/testing.ts";

function assertAlmostEquals(actual: number, expected: number, tolerance: number) {
  assert(Math.abs(actual - expected) <= tolerance, `${actual} is not ${expected} ± ${tolerance}`);
}

const run = (tokensPerS: number) => ({ tokensPerS, steps: 24, submits: 24 });

function decodeResult(): DecodeResult {
  return {
    adapter: "test adapter",
    dtype: "f16",
    weightLayout: "texture",
    dispatchesPerStep: 275,
    decodeSteps: 8,
    groupMs: 100,
    prefill: { tokens: 256, seconds: 1 },
    batches: [
      { batch: 1, single: run(10), multi: run(14) }, // 1.4× multi-step
      { batch: 4, single: run(30), multi: run(35) },
      { batch: 16, single: run(60), multi: run(70) }, // 70 / 14 = 5× batch 1
    ],
    splitContext: 64,
    split: [{
      batch: 1,
      stepMs: 80,
      // Weight kernels 30 + 10 ms of an 80 ms step: 50% does not depend on the weights.
      kindMs: new Map([["weights", 30], ["lmHead", 10], ["attention", 5], ["sampler", 3]]),
      kindCount: new Map([["weights", 120], ["lmHead", 1], ["attention", 90], ["sampler", 2]]),
    }],
  };
}

function quantResult(): DecodeQuantResult {
  return {
    adapter: "test adapter",
    kinds: ["f16", "q4_0"],
    steps: 24,
    rounds: 3,
    tokensPerS: {
      // Batch 1 per-round ratios 3, 2, 2.5 → median 2.5 (exactly the goal: met).
      f16: { 1: [10, 10, 10], 16: [100, 100, 100] },
      q4_0: { 1: [30, 20, 25], 16: [40, 50, 45] }, // 0.4, 0.5, 0.45 → 0.45
    },
    weightBytes: { f16: 270e6, q4_0: 76e6 },
  };
}

function stepSplitResult(): StepSplitResult {
  return {
    adapter: "test adapter",
    f16: true,
    options: { batch: [1], steps: 8, rounds: 5, context: 64, line: "off" },
    dispatches: 275,
    kernelsByKind: {},
    greedyChunks: 48,
    // Weights 100 − 60 = 40, LM head 100 − 80 = 20: 40 ms of 100 by removal.
    batches: [{ batch: 1, ms: { "whole step": 100, "no weights": 60, "no LM head": 80 } }],
    line: null,
    timestamps: null,
  };
}

const cell = (storageKernel: number[], textureKernel: number[]): MatvecCell => ({
  bytes: 1 << 20,
  storageKernel,
  textureKernel,
  storageRoofline: [10, 10, 10],
  textureRoofline: [20, 40, 20], // the faster roofline each round: 20, 40, 20
});

function matvecResult(): MatvecResult {
  return {
    adapter: "test adapter",
    f16: true,
    formats: ["f16", "q4_k"],
    rows: [
      // texture 19/20, 38/40, 19/20 → 95%; storage 50% at most: texture's counts.
      { shape: "o_proj", dims: "576×576 add", cells: [cell([10, 10, 10], [19, 38, 19]), null] },
      // texture 18/20, 30/40, 18/20 → 90%; the worst f16 shape.
      { shape: "LM head", dims: "576×49152 store", cells: [cell([5, 5, 5], [18, 30, 18]), null] },
    ],
  };
}

function llamaResult(): ReportInput {
  const m = (round: number, engine: Measured["engine"], threads: number, x: number): Measured => ({
    round,
    kind: "f16",
    engine,
    threads,
    what: "decode",
    tokensPerS: x,
  });
  return {
    adapter: "test adapter",
    lavapipeThreads: null,
    cpus: 2,
    llama: {
      gpu: false,
      buildType: "prebuilt",
      release: "b1",
      systemInfo: "",
      cpuMathCores: 2,
      node: "v20",
    },
    flashAttention: "false",
    kinds: ["f16"],
    threads: [2, 1],
    steps: 64,
    rounds: 3,
    prompt: 0,
    results: [
      // Against 1 thread (the fewest): 0.5, 0.4, 0.45 → 0.45. Against 2: never used.
      ...[15, 12, 18].map((x, r) => m(r, "sluice", 0, x)),
      ...[30, 30, 40].map((x, r) => m(r, "llama.cpp", 1, x)),
      ...[5, 5, 5].map((x, r) => m(r, "llama.cpp", 2, x)),
    ],
    agreement: [],
  };
}

const full = (): SpeedResults => ({
  decode: decodeResult(),
  quant: quantResult(),
  stepSplit: stepSplitResult(),
  matvec: matvecResult(),
  llamacpp: llamaResult(),
});

const byWhat = (figures: Figure[], start: string) => {
  const f = figures.find((x) => x.what.startsWith(start));
  assert(f, `no figure "${start}"`);
  return f;
};

Deno.test("verdict: at least and at most, the target itself met, no value not measured", () => {
  const f = (value: number | null, comparison: "at least" | "at most", target = 1): Figure => ({
    what: "x",
    value,
    unit: "×",
    goal: { comparison, target },
    note: "",
  });
  assertEquals(verdict(f(1.3, "at least", 1.3)), "met");
  assertEquals(verdict(f(1.29, "at least", 1.3)), "not met");
  assertEquals(verdict(f(0.25, "at most", 0.25)), "met");
  assertEquals(verdict(f(0.26, "at most", 0.25)), "not met");
  assertEquals(verdict(f(null, "at least")), "not measured");
  assertEquals(verdict(f(NaN, "at least")), "not measured");
  assertEquals(verdict({ what: "n", value: 275, unit: "count", note: "" }), "no goal");
});

Deno.test("scorecardFigures: each ratio and share from the typed results", () => {
  const figures = scorecardFigures(full());
  const value = (start: string) => byWhat(figures, start).value!;
  assertAlmostEquals(value("batch-1 decode, multi-step"), 1.4, 1e-12);
  assertAlmostEquals(value("decode tokens/s, batch 16"), 5, 1e-12);
  // The larger of timestamps' 50% and removal's 40%.
  assertAlmostEquals(value("weight-independent"), 0.5, 1e-12);
  assertMatch(byWhat(figures, "weight-independent").note, /GPU timestamps 50%.*removal 40%/);
  assertAlmostEquals(value("decode tokens/s, Q4_0 ÷ f16, batch 1"), 2.5, 1e-12);
  assertAlmostEquals(value("decode tokens/s, Q4_0 ÷ f16, batch 16"), 0.45, 1e-12);
  assertAlmostEquals(value("f16 matvec"), 0.9, 1e-12);
  assertMatch(byWhat(figures, "f16 matvec").note, /worst: LM head \(weights in texture\)/);
  assertEquals(byWhat(figures, "q4_k matvec").value, null);
  assertEquals(value("dispatches per decode step"), 275);
  assertAlmostEquals(value("batch-1 decode ÷ llama.cpp CPU (1 thread), f16"), 0.45, 1e-12);

  const verdicts = Object.fromEntries(figures.map((f) => [f.what, verdict(f)]));
  assertEquals(verdicts["batch-1 decode, multi-step ÷ one step per submission (k = 1)"], "met");
  assertEquals(verdicts["decode tokens/s, batch 16 ÷ batch 1"], "not met");
  assertEquals(verdicts["weight-independent part of a batch-1 f16 step"], "not met");
  assertEquals(verdicts["decode tokens/s, Q4_0 ÷ f16, batch 1"], "met");
  assertEquals(verdicts["decode tokens/s, Q4_0 ÷ f16, batch 16"], "not met");
  assertEquals(verdicts["f16 matvec ÷ the better read roofline (worst shape)"], "met");
  assertEquals(verdicts["dispatches per decode step"], "no goal");
});

Deno.test("weightIndependentShare: of the kernels' sum where it exceeds the untimed step", () => {
  const t = decodeResult().split![0];
  assertAlmostEquals(weightIndependentShare(t), 0.5, 1e-12);
  // Kernels 60 + 20 + 20 = 100 ms timed against a 50 ms step: the weights' share is 60%.
  const over = {
    ...t,
    stepMs: 50,
    kindMs: new Map([["weights", 60], ["attention", 20], ["sampler", 20]]),
  };
  assertAlmostEquals(weightIndependentShare(over), 0.4, 1e-12);
});

Deno.test("scorecardFigures: the weight-independent part is the larger estimate measured", () => {
  const decode = decodeResult();
  decode.split = null;
  const f = byWhat(scorecardFigures({ ...full(), decode }), "weight-independent");
  assertAlmostEquals(f.value!, 0.4, 1e-12);
  assertMatch(f.note, /removal 40%/);
  // Removal above timestamps: removal's figure, so a goal is met only if both methods meet it.
  const split = stepSplitResult();
  split.batches[0].ms["no weights"] = 90; // weights 10 + LM head 20 of 100 ms: 70% independent
  const g = byWhat(scorecardFigures({ ...full(), stepSplit: split }), "weight-independent");
  assertAlmostEquals(g.value!, 0.7, 1e-12);
  assertEquals(verdict(g), "not met");
});

Deno.test("scorecardFigures: skipped or failed sections are not measured, with the reason", () => {
  const figures = scorecardFigures({
    ...full(),
    quant: { notRun: "quant failed: out of memory" },
    llamacpp: { notRun: "skipped (--llamacpp off)" },
  });
  for (
    const start of ["decode tokens/s, Q4_0 ÷ f16, batch 1", "decode tokens/s, Q4_0 ÷ f16, batch 16"]
  ) {
    const f = byWhat(figures, start);
    assertEquals(f.value, null);
    assertEquals(verdict(f), "not measured");
    assertMatch(f.note, /out of memory/);
  }
  const llama = byWhat(figures, "batch-1 decode ÷ llama.cpp");
  assertEquals(verdict(llama), "not measured");
  assertMatch(llama.note, /--llamacpp off/);
  const noFormats = scorecardFigures({ ...full(), matvec: { ...matvecResult(), formats: [] } });
  assertEquals(verdict(byWhat(noFormats, "matvec")), "not measured");
  // The other sections still give their figures.
  assertEquals(verdict(byWhat(figures, "batch-1 decode, multi-step")), "met");

  const none = scorecardFigures({
    decode: { notRun: "a" },
    quant: { notRun: "b" },
    stepSplit: { notRun: "c" },
    matvec: { notRun: "d" },
    llamacpp: { notRun: "e" },
  });
  assert(none.every((f) => f.value === null), "a figure from no results");
  assertMatch(byWhat(none, "weight-independent").note, /a; c/);
});

Deno.test("matvecBestShare: per round against the faster roofline, the better layout", () => {
  const storageWins = matvecBestShare({
    bytes: 1,
    storageKernel: [9, 9, 9],
    textureKernel: [1, 1, 1],
    storageRoofline: [10, 10, 10],
    textureRoofline: [5, 5, 12], // faster rooflines 10, 10, 12 → 0.9, 0.9, 0.75
  });
  assertEquals(storageWins.layout, "storage");
  assertAlmostEquals(storageWins.share, 0.9, 1e-12);
});

Deno.test("goalsTable: measured, goal and verdict per row; not measured shows no number", () => {
  const lines = goalsTable([
    {
      what: "ratio",
      value: 1.4,
      unit: "×",
      goal: { comparison: "at least", target: 1.3 },
      note: "n1",
    },
    {
      what: "share",
      value: 0.5,
      unit: "%",
      goal: { comparison: "at most", target: 0.25 },
      note: "n2",
    },
    { what: "count", value: 275, unit: "count", note: "n3" },
    {
      what: "missing",
      value: null,
      unit: "×",
      goal: { comparison: "at least", target: 1 },
      note: "why",
    },
  ]);
  assertEquals(lines.slice(2, 6), [
    "| ratio | 1.40× | ≥ 1.30× | **met** | n1 |",
    "| share | 50% | ≤ 25% | not met | n2 |",
    "| count | 275 | — | reported | n3 |",
    "| missing | — | ≥ 1.00× | not measured | why |",
  ]);
  assertEquals(lines.at(-1), "Goals met: 1 of 3 (1 not measured).");
});

Deno.test("scorecardFigures: the int kernels' ratios to f16, their decode and matvec GB/s", () => {
  const quant: DecodeQuantResult = {
    ...quantResult(),
    kinds: ["f16", "q4_0", "q4_k_m"],
    intKinds: ["q4_0", "q4_k_m"],
    tokensPerS: {
      f16: { 1: [10, 10, 10], 16: [100, 100, 100] },
      q4_0: { 1: [30, 20, 25], 16: [40, 50, 45] },
      "q4_0 int": { 1: [20, 22, 18], 16: [110, 90, 100] }, // 2, 2.2, 1.8 → 2 (met); 1.1, 0.9, 1 → 1
      q4_k_m: { 1: [15, 15, 15], 16: [50, 50, 50] },
      "q4_k_m int": { 1: [17, 18, 16], 16: [60, 60, 60] }, // 1.7, 1.8, 1.6 → 1.7 (not met)
    },
    weightBytes: { f16: 270e6, q4_0: 76e6, "q4_0 int": 76e6, q4_k_m: 90e6, "q4_k_m int": 90e6 },
  };
  const matvec: MatvecResult = {
    ...matvecResult(),
    formats: ["q4_0"],
    rows: [{
      shape: "down_proj",
      dims: "1536×576 add",
      cells: [{ ...cell([4, 5, 6], [7, 8, 9]), intKernel: [12, 16, 14] }],
    }],
  };
  const figures = scorecardFigures({ ...full(), quant, matvec });
  const value = (start: string) => byWhat(figures, start).value!;
  assertAlmostEquals(value("decode tokens/s, Q4_0 int kernels ÷ f16, batch 1"), 2, 1e-12);
  assertAlmostEquals(value("decode tokens/s, Q4_0 int kernels ÷ f16, batch 16"), 1, 1e-12);
  assertAlmostEquals(value("decode tokens/s, Q4_K_M int kernels ÷ f16, batch 1"), 1.7, 1e-12);
  assertEquals(verdict(byWhat(figures, "decode tokens/s, Q4_0 int kernels ÷ f16, batch 1")), "met");
  assertEquals(verdict(byWhat(figures, "decode tokens/s, Q4_K_M int")), "not met");
  // Weight bytes × the median batch-1 tokens/s.
  assertAlmostEquals(value("q4_0 int kernels: batch-1 decode weight GB/s"), 76e6 * 20 / 1e9, 1e-9);
  assertAlmostEquals(
    value("q4_0 float kernels: batch-1 decode weight GB/s"),
    76e6 * 25 / 1e9,
    1e-9,
  );
  // Float: the better layout's median (texture 8); int: 14.
  assertAlmostEquals(value("q4_0 matvec GB/s, float"), 8, 1e-12);
  assertAlmostEquals(value("q4_0 matvec GB/s, int"), 14, 1e-12);
  // Not measured with the int kernels: a row saying so, no number.
  const none = scorecardFigures({ ...full(), quant: { ...quant, intKinds: [] } });
  assertEquals(byWhat(none, "decode tokens/s, Q4_0 int kernels ÷ f16, batch 1").value, null);
});
