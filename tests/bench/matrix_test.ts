// The workload matrix's pure parts: the committed cells (every dimension covered, workloads
// reproducible from their seeds and bounded by the model's context), issue 19's goals on hand-made
// figures, the report's tables, and the flags.

import {
  applyOverrides,
  type Cell,
  CELLS,
  cellWorkload,
  PROMPTS,
  READERS,
  selectCells,
  underPressure,
} from "../../bench/matrix/cells.ts";
import {
  type Figures,
  figuresOf,
  judgeCell,
  ratio,
  STALL_FLOOR_S,
  within,
} from "../../bench/matrix/goals.ts";
import { type CellRun, matrixReport } from "../../bench/matrix/report.ts";
import { BASELINE, VLLM_V1_FLAGS } from "../../bench/matrix/flags.ts";
import { benchMatrix } from "../../bench/matrix.ts";
import { UsageError } from "../../bench/common/cli.ts";
import { displayTimes } from "../../bench/serve/playout.ts";
import { summarize } from "../../bench/serve/metrics.ts";
import type { RequestRecord } from "../../bench/serve/record.ts";
import type { ConfigResult } from "../../bench/serve/run.ts";
import type { ServerMetricsSummary } from "../../bench/serve/server_metrics.ts";
import { parseDist } from "../../bench/serve/random.ts";
import { assert, assertEquals, assertRejects, assertThrows } from "../helpers/testing.ts";
import { testSeed } from "../helpers/random.ts";

// ---- cells -------------------------------------------------------------------------------------

Deno.test("cells: at least 8, unique ids and seeds, every dimension on both sides", () => {
  assert(CELLS.length >= 8);
  assertEquals(new Set(CELLS.map((c) => c.id)).size, CELLS.length, "ids");
  assertEquals(new Set(CELLS.map((c) => c.seed)).size, CELLS.length, "seeds");
  const has = (p: (c: Cell) => boolean, what: string) => assert(CELLS.some(p), what);
  for (const r of ["slow", "human", "fast", "unpaced"]) has((c) => c.readers === r, r);
  for (const p of ["chat", "doc"]) has((c) => c.prompts === p, p);
  for (const b of ["tight", "ample"]) has((c) => c.budget === b, b);
  has((c) => c.arrival.kind === "steady", "steady Poisson");
  const bursts = CELLS.flatMap((c) => (c.arrival.kind === "burst" ? [c.arrival.size] : []));
  assert(bursts.every((n) => n >= 8 && n <= 32), `bursts of 8–32: ${bursts}`);
  assert(bursts.includes(8) && bursts.includes(32), "both ends of the burst range");
  // Memory pressure is the tight budget, with and without documents and steady arrivals.
  has((c) => underPressure(c) && c.prompts === "doc", "a document cell under pressure");
  has((c) => underPressure(c) && c.arrival.kind === "steady", "a steady cell under pressure");
  assertEquals(CELLS.filter(underPressure), CELLS.filter((c) => c.budget === "tight"));
});

Deno.test("cells: a workload is a function of the cell's seed", () => {
  for (const c of CELLS) {
    const a = cellWorkload(c, 2048);
    assert(a.length > 0, c.id);
    assertEquals(cellWorkload(c, 2048), a, c.id);
    const other = cellWorkload(applyOverrides(c, { seedOffset: 1 }), 2048);
    assert(JSON.stringify(other) !== JSON.stringify(a), `${c.id}: another seed, another draw`);
  }
});

Deno.test("cells: requests fit the context; documents are 1–2k tokens where it allows", () => {
  const seed = testSeed();
  const next = (() => {
    let s = seed;
    return () => (s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32;
  })();
  for (const c of CELLS) {
    for (const ctx of [64, 600, 1984, 2048, 4096, 100 + Math.floor(next() * 4000)]) {
      for (const r of cellWorkload(c, ctx)) {
        const what = `${c.id}, context ${ctx}, request ${r.id} (seed ${seed})`;
        assert(r.promptLen! >= 1 && r.outputLen >= 0, what);
        assert(r.promptLen! + r.outputLen <= ctx, what);
      }
    }
    const unbounded = cellWorkload(c, undefined);
    if (c.prompts === "doc") {
      assert(unbounded.every((r) => r.promptLen! >= 1024 && r.promptLen! <= 2048), c.id);
      // With room for them, documents keep their drawn length.
      assertEquals(
        cellWorkload(c, 4096).map((r) => r.promptLen),
        unbounded.map((r) => r.promptLen),
      );
    }
  }
});

Deno.test("cells: readers, SLOs and arrivals as the cell says", () => {
  for (const c of CELLS) {
    const w = cellWorkload(c, 2048);
    const d = parseDist(READERS[c.readers].dist);
    const lo = d.kind === "uniform" ? d.lo : d.kind === "fixed" ? d.value : -Infinity;
    const hi = d.kind === "uniform" ? d.hi : d.kind === "fixed" ? d.value : Infinity;
    for (const r of w) {
      assert(r.readingRate >= lo && r.readingRate <= hi, `${c.id}: rate ${r.readingRate}`);
      // No reader's own pace breaks its TBT SLO: a paced stream can meet it.
      assert(1000 / r.readingRate < r.sloTbtMs, `${c.id}: pace vs TBT SLO`);
      assertEquals([r.sloTtftMs, r.sloTbtMs], [
        PROMPTS[c.prompts].sloTtftMs,
        READERS[c.readers].sloTbtMs,
      ]);
      assert(r.arrivalS >= 0 && r.arrivalS <= Math.max(c.durationS, 2), c.id);
    }
    assert(w.length <= c.maxRequests, c.id);
    if (c.arrival.kind === "burst") {
      const inBurst = w.filter((r) => r.arrivalS >= 1 && r.arrivalS <= 2).length;
      assert(inBurst >= c.arrival.size, `${c.id}: ${inBurst} in the burst window`);
    }
  }
});

Deno.test("cells: overrides cap, scale and shift; selection keeps the list's order", () => {
  const c = CELLS.find((x) => x.arrival.kind === "burst")!;
  const o = applyOverrides(c, { maxRequests: 2, durationS: 3, rateScale: 2, seedOffset: 5 });
  assertEquals(o.maxRequests, 2);
  assertEquals(o.durationS, 3);
  assertEquals(o.seed, c.seed + 5);
  assertEquals(o.arrival, {
    kind: "burst",
    size: 2,
    backgroundRate: (c.arrival as { backgroundRate: number }).backgroundRate * 2,
  });
  assertEquals(cellWorkload(o, 2048).length, 2);
  assertEquals(applyOverrides(c, {}), c);
  const ids = [CELLS[3].id, CELLS[0].id];
  assertEquals(selectCells(ids).map((x) => x.id), [CELLS[0].id, CELLS[3].id]);
  assertEquals(selectCells(undefined).length, CELLS.length);
  assertThrows(() => selectCells(["no-such-cell"]), /no-such-cell/);
});

// ---- goals -------------------------------------------------------------------------------------

const BASE: Figures = {
  ttftP99Ms: 10_000,
  ttftAttainment: 0.5,
  tbtAttainment: 0.9,
  sloGoodput: 0.4,
  stallTotalS: 20,
  rawTokensPerS: 100,
  preemptions: 10,
};

const goal = (c: Figures, b: Figures, pressure: boolean, id: string) =>
  judgeCell(c, b, pressure).goals.find((g) => g.id === id);

Deno.test("goals: every cell's four, at their bounds exactly", () => {
  const atBounds: Figures = {
    ...BASE,
    ttftP99Ms: 10_500,
    sloGoodput: 0.4,
    stallTotalS: 10,
    rawTokensPerS: 95,
  };
  const v = judgeCell(atBounds, BASE, false);
  assertEquals(v.goals.map((g) => [g.id, g.met]), [
    ["ttft-p99", true],
    ["goodput", true],
    ["stall", true],
    ["raw", true],
  ]);
  assert(v.allMet);
  assertEquals(v.ratios.ttftP99Ms, 1.05);
  assertEquals(v.ratios.preemptions, 1);
  for (
    const [change, id] of [
      [{ ttftP99Ms: 10_600 }, "ttft-p99"],
      [{ sloGoodput: 0.39 }, "goodput"],
      [{ stallTotalS: 10.1 }, "stall"],
      [{ rawTokensPerS: 94.9 }, "raw"],
    ] as const
  ) {
    const w = judgeCell({ ...atBounds, ...change }, BASE, false);
    assertEquals(w.goals.find((g) => g.id === id)!.met, false, id);
    assert(!w.allMet, id);
  }
});

Deno.test("goals: no stall goal where the baseline barely stalled", () => {
  const calm = { ...BASE, stallTotalS: STALL_FLOOR_S };
  const g = goal({ ...BASE, stallTotalS: 5 }, calm, false, "stall")!;
  assertEquals([g.met, typeof g.na], [null, "string"]);
  assert(judgeCell({ ...BASE, stallTotalS: 5 }, calm, false).allMet, "n/a is not a miss");
  assertEquals(
    goal({ ...BASE, stallTotalS: 0.5 }, { ...BASE, stallTotalS: 1.01 }, false, "stall")!.met,
    true,
  );
});

Deno.test("goals: under memory pressure, goodput or stall, and TTFT p99 <= 0.8x", () => {
  const p = (c: Partial<Figures>) => goal({ ...BASE, ...c }, BASE, true, "pressure")!.met;
  assertEquals(p({ ttftP99Ms: 8000, sloGoodput: 0.6 }), true, "goodput 1.5x");
  assertEquals(p({ ttftP99Ms: 8000, stallTotalS: 5 }), true, "stall 0.25x");
  assertEquals(p({ ttftP99Ms: 8000, sloGoodput: 0.59, stallTotalS: 5.1 }), false, "neither");
  assertEquals(p({ ttftP99Ms: 8001, sloGoodput: 0.8 }), false, "TTFT p99 over 0.8x");
  assertEquals(p({ ttftP99Ms: null }), null, "no TTFT: cannot be judged");
  assert(!judgeCell({ ...BASE, ttftP99Ms: null }, BASE, true).allMet, "a missing figure is a miss");
  assertEquals(judgeCell(BASE, BASE, false).goals.length, 4, "no pressure goal without pressure");
  assertEquals(judgeCell(BASE, BASE, true).goals.length, 5);
});

Deno.test("goals: a zero baseline is judged without dividing", () => {
  assertEquals(ratio(3, 0), null);
  assertEquals(ratio(null, 2), null);
  assertEquals(ratio(3, 2), 1.5);
  assertEquals(within(0, 0, 0.5, true), true, "at most: zero meets zero");
  assertEquals(within(0.1, 0, 0.5, true), false, "at most: anything above zero does not");
  assertEquals(within(0, 0, 1.0, false), true, "at least 1.0x of nothing: met");
  assertEquals(within(0, 0, 1.5, false), false, "at least 1.5x of nothing: needs something");
  assertEquals(within(0.1, 0, 1.5, false), true);
  const noGood = { ...BASE, sloGoodput: 0 };
  assertEquals(goal(noGood, noGood, false, "goodput")!.met, true);
  assertEquals(goal({ ...noGood, ttftP99Ms: 5000 }, noGood, true, "pressure")!.met, false);
  assertEquals(
    goal({ ...BASE, sloGoodput: 0.1, ttftP99Ms: 5000 }, noGood, true, "pressure")!.met,
    true,
  );
});

// ---- report ------------------------------------------------------------------------------------

function record(id: number, ttft: number, gap: number, n: number): RequestRecord {
  const arrivalsMs = Array.from({ length: n }, (_, j) => ttft + j * gap);
  return {
    id,
    outcome: "ok",
    sentAtMs: id * 100,
    endAtMs: id * 100 + arrivalsMs[n - 1],
    arrivalsMs,
    displayMs: displayTimes(arrivalsMs, 10),
    readingRate: 10,
    sloTtftMs: 1000,
    sloTbtMs: 250,
    maxTokens: n,
  };
}

function result(name: string, ttfts: number[], preemptions: number): ConfigResult {
  const records = ttfts.map((t, i) => record(i, t, 100, 5));
  return {
    config: { name, flags: ["--gpu-kv-mb", "2"] },
    records,
    scrapes: [],
    scrapeFailures: 0,
    summary: summarize(records),
    server: { preemptions } as ServerMetricsSummary,
    warmupErrors: [],
    wallS: 1,
  };
}

function run(cell: Cell, results: ConfigResult[]): CellRun {
  return {
    cell,
    budgetMb: 2,
    maxContext: 1984,
    requests: 2,
    promptTokens: 10,
    outputTokens: 10,
    folder: cell.id,
    results,
  };
}

Deno.test("report: per cell the ratios and goals, a summary row per cell, missing runs named", () => {
  const tight = CELLS.find((c) => c.budget === "tight")!;
  const ample = CELLS.find((c) => c.budget === "ample")!;
  const md = matrixReport({
    title: "T",
    context: ["c"],
    baseline: BASELINE,
    runs: [
      // default: TTFT 200/300 vs 2000/3000 (0.1x), all within SLO against half: goodput 2x.
      run(tight, [result(BASELINE, [2000, 300], 4), result("default", [200, 300], 1)]),
      run(ample, [result(BASELINE, [200, 300], 0), {
        ...result("default", [], 0),
        summary: null,
        error: "boom",
      }]),
    ],
    reproduce: "deno task bench matrix",
  });
  const rows = md.split("\n").filter((l) =>
    l.startsWith(`| ${tight.id} |`) || l.startsWith(`| ${ample.id} |`)
  );
  assertEquals(rows.length, 2, md);
  assert(rows[0].includes("| yes |"), "pressure marked");
  assert(rows[0].includes("2.00× ✓"), `goodput ratio: ${rows[0]}`);
  assert(rows[0].includes("1 vs 4"), "preemptions: both counts");
  assert(rows[0].endsWith("| ✓ | **met** |"), rows[0]);
  assert(rows[1].includes("not measured"), rows[1]);
  assert(md.includes("All goals met in 1 of 2 cells."));
  assert(md.includes("`default` could not be measured: boom"));
  assert(md.includes(`### ${tight.id} (under memory pressure)`));
  assert(md.includes("| TTFT p99 | 1.98 s | 0.30 s | 0.15× |"), md);
  assert(md.includes("SLO goodput"), "the rule is stated");
  assertEquals(figuresOf(result("x", [100], 3))!.preemptions, 3);
});

// ---- flags -------------------------------------------------------------------------------------

Deno.test("flags: fcfs as vLLM V1 by default; bad configurations refused before any server", async () => {
  assert(VLLM_V1_FLAGS.includes("--sched fcfs") && VLLM_V1_FLAGS.includes("--prefix-cache on"));
  assert(VLLM_V1_FLAGS.includes("--preempt recompute") && VLLM_V1_FLAGS.includes("--host-kv-mb 0"));
  const bad = [
    ["--configs", "a=--gpu-kv-mb 3;b"],
    ["--configs", "a;b"],
    ["--configs", `${BASELINE}`],
    ["--baseline", "nope"],
    ["--cells", "no-such-cell"],
    ["--cells", ""],
    ["--frobnicate", "1"],
  ];
  for (const args of bad) await assertRejects(() => benchMatrix(args), UsageError, args.join(" "));
});
