// Workload generation for the serving benchmark: reproducible for a seed, distributions that look
// like what the flags promise, the trace format (and its round trip through workload.jsonl),
// prompt materialization within the model's limits, and the command-line flags.

import {
  parseConfigs,
  parseServeBenchFlags,
  splitFlags,
  UsageError,
} from "../../bench/serve/flags.ts";
import { parseDist, sampleDist, seededRandom } from "../../bench/serve/random.ts";
import {
  arrivals,
  boundByContext,
  drawLengths,
  type GenerateOptions,
  generateWorkload,
  materialize,
  parseTrace,
  workloadToJsonl,
} from "../../bench/serve/workload.ts";
import { assert, assertEquals, assertThrows } from "../helpers/testing.ts";
import { testSeed } from "../helpers/random.ts";

const BASE: GenerateOptions = {
  kind: "burst",
  seed: 1,
  rate: 0.5,
  durationS: 20,
  burstSize: 8,
  burstAtS: 2,
  burstWindowS: 1,
  lengths: "short",
  readingRate: parseDist("normal:15:4"),
  sloTtftMs: 1300,
  sloTbtMs: 250,
  maxRequests: 100,
  cancelFraction: 0,
};

const mean = (v: number[]) => v.reduce((s, x) => s + x, 0) / v.length;

Deno.test("workload: the same seed gives the same workload; another seed another one", () => {
  const seed = testSeed();
  const a = generateWorkload({ ...BASE, seed });
  assertEquals(generateWorkload({ ...BASE, seed }), a, `seed ${seed}`);
  assert(
    JSON.stringify(generateWorkload({ ...BASE, seed: seed + 1 })) !== JSON.stringify(a),
    `seed ${seed}`,
  );
  assertEquals(a.map((r) => r.id), a.map((_, i) => i), "ids in arrival order");
  for (let i = 1; i < a.length; i++) {
    assert(a[i].arrivalS >= a[i - 1].arrivalS, "sorted by arrival");
  }
});

Deno.test("workload: Poisson arrivals have the requested rate and stay in the window", () => {
  const seed = testSeed();
  const t = arrivals({
    ...BASE,
    kind: "poisson",
    seed,
    rate: 5,
    durationS: 200,
    maxRequests: 10_000,
  });
  // Expected 1000 arrivals, sd ~32: six sd either way.
  assert(t.length > 810 && t.length < 1190, `seed ${seed}: ${t.length} arrivals`);
  assert(t.every((x) => x >= 0 && x < 200), `seed ${seed}: outside the window`);
  const gaps = t.slice(1).map((x, i) => x - t[i]);
  const m = mean(gaps);
  assert(Math.abs(m - 0.2) < 0.03, `seed ${seed}: mean gap ${m}`);
  // Exponential gaps: sd equals the mean.
  const sd = Math.sqrt(mean(gaps.map((g) => (g - m) ** 2)));
  assert(Math.abs(sd / m - 1) < 0.15, `seed ${seed}: gap cv ${sd / m}`);
  assertEquals(
    arrivals({ ...BASE, kind: "poisson", rate: 50, maxRequests: 7 }).length,
    7,
    "capped",
  );
});

Deno.test("workload: a burst lands inside its one-second window on top of the background", () => {
  const seed = testSeed();
  const w = generateWorkload({
    ...BASE,
    seed,
    burstSize: 32,
    burstAtS: 5,
    rate: 0.2,
    durationS: 30,
  });
  const inBurst = w.filter((r) => r.arrivalS >= 5 && r.arrivalS <= 6);
  assert(inBurst.length >= 32, `seed ${seed}: ${inBurst.length} in the burst window`);
  assert(w.length - 32 < 30, `seed ${seed}: light background (${w.length - 32})`);
  // The cap keeps the whole burst and trims the background.
  const capped = arrivals({
    ...BASE,
    seed,
    burstSize: 32,
    burstAtS: 5,
    rate: 5,
    durationS: 30,
    maxRequests: 40,
  });
  assertEquals(capped.length, 40);
  assert(capped.filter((t) => t >= 5 && t <= 6).length >= 32, `seed ${seed}`);
  assertEquals(arrivals({ ...BASE, burstSize: 50, rate: 0, maxRequests: 10 }).length, 10);
});

Deno.test("workload: length profiles and reading rates look like their flags", () => {
  const seed = testSeed();
  const next = seededRandom(seed);
  const short = Array.from({ length: 4000 }, () => drawLengths(next, "short"));
  const long = Array.from({ length: 4000 }, () => drawLengths(next, "long"));
  const mixed = Array.from({ length: 4000 }, () => drawLengths(next, "mixed"));
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1];
  assert(
    short.every((l) => l.prompt >= 4 && l.prompt <= 1024 && l.output >= 4 && l.output <= 512),
    `seed ${seed}`,
  );
  const sp = median(short.map((l) => l.prompt));
  const so = median(short.map((l) => l.output));
  assert(sp > 80 && sp < 115 && so > 85 && so < 108, `seed ${seed}: short medians ${sp}, ${so}`);
  assert(long.every((l) => l.prompt >= 1024 && l.prompt <= 8192), `seed ${seed}`);
  const lp = mean(long.map((l) => l.prompt));
  assert(Math.abs(lp - 3000) < 100, `seed ${seed}: long mean ${lp}`);
  const longShare = mixed.filter((l) => l.prompt >= 1024).length / mixed.length;
  assert(Math.abs(longShare - 0.25) < 0.04, `seed ${seed}: long share ${longShare}`);

  const rates = (spec: string, n = 4000) => {
    const w = generateWorkload({
      ...BASE,
      seed,
      kind: "poisson",
      rate: 1000,
      durationS: 100,
      maxRequests: n,
      readingRate: parseDist(spec),
    });
    return w.map((r) => r.readingRate);
  };
  const normal = rates("normal:15:4");
  assert(Math.abs(mean(normal) - 15) < 0.3, `seed ${seed}: mean rate ${mean(normal)}`);
  assert(rates("fixed:12", 50).every((r) => r === 12));
  assert(rates("normal:0:5", 500).every((r) => r >= 1), "rates clamped to >= 1 token/s");
  const mix = rates("mix:15@0.4,20@0.6");
  assert(mix.every((r) => r === 15 || r === 20));
  const at15 = mix.filter((r) => r === 15).length / mix.length;
  assert(Math.abs(at15 - 0.4) < 0.04, `seed ${seed}: share at 15 tok/s ${at15}`);
  const uni = rates("uniform:10:20", 2000);
  assert(uni.every((r) => r >= 10 && r <= 20) && Math.abs(mean(uni) - 15) < 0.4, `seed ${seed}`);
  assertEquals(
    generateWorkload({ ...BASE, seed }).every((r) => r.sloTtftMs === 1300 && r.sloTbtMs === 250),
    true,
  );
});

Deno.test("workload: distribution specs are parsed or refused", () => {
  assertEquals(parseDist("fixed:12"), { kind: "fixed", value: 12 });
  assertEquals(parseDist("normal:15:4"), { kind: "normal", mean: 15, sd: 4 });
  assertEquals(parseDist("mix:15@1,20@3"), {
    kind: "mix",
    values: [15, 20],
    weights: [0.25, 0.75],
  });
  for (
    const bad of [
      "",
      "normal:15",
      "fixed:x",
      "uniform:5:1",
      "mix:",
      "mix:15@-1",
      "poisson:3",
      "normal:1:-1",
    ]
  ) {
    assertThrows(() => parseDist(bad), Error, bad);
  }
  assertEquals(sampleDist(() => 0.99, parseDist("mix:1@0.5,2@0.5")), 2);
});

Deno.test("workload: cancellations are drawn within the output", () => {
  const seed = testSeed();
  const w = generateWorkload({
    ...BASE,
    seed,
    kind: "poisson",
    rate: 100,
    durationS: 10,
    maxRequests: 400,
    cancelFraction: 0.5,
  });
  const c = w.filter((r) => r.cancelAfterTokens !== undefined);
  assert(Math.abs(c.length / w.length - 0.5) < 0.1, `seed ${seed}: ${c.length} of ${w.length}`);
  assert(
    c.every((r) => r.cancelAfterTokens! >= 1 && r.cancelAfterTokens! < r.outputLen),
    `seed ${seed}`,
  );
});

const DEFAULTS = {
  seed: 3,
  readingRate: parseDist("fixed:12"),
  sloTtftMs: 2000,
  sloTbtMs: 100,
  maxRequests: 100,
};

Deno.test("trace: JSON lines with defaults from the flags, sorted, capped, validated", () => {
  const text = [
    `{"arrival_s": 2.5, "prompt_len": 100, "output_len": 50}`,
    ``,
    `{"arrival_s": 0.5, "prompt": "Hello there", "output_len": 0, "reading_rate": 20, "slo_ttft_ms": 500, "slo_tbt_ms": 80}`,
    `{"id": 9, "arrival_s": 1, "prompt_ids": [1, 2, 3], "output_len": 8, "cancel_after_tokens": 4}`,
  ].join("\n");
  const w = parseTrace(text, DEFAULTS);
  assertEquals(w.map((r) => r.id), [0, 9, 2], "ids default to the position after sorting");
  assertEquals(w[0], {
    id: 0,
    arrivalS: 0.5,
    promptText: "Hello there",
    outputLen: 0,
    readingRate: 20,
    sloTtftMs: 500,
    sloTbtMs: 80,
  });
  assertEquals(w[1].promptIds, [1, 2, 3]);
  assertEquals(w[1].cancelAfterTokens, 4);
  assertEquals([w[2].readingRate, w[2].sloTtftMs, w[2].sloTbtMs, w[2].promptLen], [
    12,
    2000,
    100,
    100,
  ]);
  assert(typeof w[2].promptSeed === "number");
  assertEquals(parseTrace(text, { ...DEFAULTS, maxRequests: 2 }).length, 2);

  const bad = (line: string, why: RegExp) =>
    assertThrows(
      () => parseTrace(`{"arrival_s":0,"prompt_len":1,"output_len":1}\n${line}`, DEFAULTS),
      why,
    );
  bad(`{"arrival_s": 1, "prompt_len": 5}`, /line 2: output_len/);
  bad(`{"arrival_s": 1, "prompt_len": 5, "prompt": "x", "output_len": 1}`, /line 2: .*exactly one/);
  bad(
    `{"arrival_s": 1, "prompt_len": 5, "output_len": 1, "reading_rte": 3}`,
    /line 2: .*reading_rte/,
  );
  bad(`{"arrival_s": -1, "prompt_len": 5, "output_len": 1}`, /line 2: arrival_s/);
  bad(`not json`, /line 2: not JSON/);
  bad(`{"id": 0, "arrival_s": 1, "prompt_len": 5, "output_len": 1}`, /duplicate id 0/);
});

Deno.test("trace: a saved workload replays as the same workload", () => {
  const seed = testSeed();
  const w = generateWorkload({ ...BASE, seed, cancelFraction: 0.3 });
  const back = parseTrace(workloadToJsonl(w), {
    ...DEFAULTS,
    readingRate: parseDist("fixed:99"),
    sloTtftMs: 1,
    sloTbtMs: 1,
  });
  assertEquals(back, w, `seed ${seed}`);
});

Deno.test("materialize: deterministic prompt ids within the vocabulary and the context", () => {
  const seed = testSeed();
  const [r] = generateWorkload({ ...BASE, seed, lengths: "long", burstSize: 1, rate: 0 });
  const a = materialize(r, { vocabSize: 1000 });
  assertEquals(a, materialize(r, { vocabSize: 1000 }), "every configuration gets the same prompt");
  const ids = a.prompt as number[];
  assertEquals([ids.length, a.maxTokens], [r.promptLen, r.outputLen]);
  assert(ids.every((x) => Number.isInteger(x) && x >= 0 && x < 1000), `seed ${seed}`);
  assert(new Set(ids).size > 100, "not a constant prompt");
  // A context limit shortens the prompt so prompt + output fits.
  const long = { ...r, promptLen: 5000, outputLen: 100 };
  const c = materialize(long, { vocabSize: 1000, maxContext: 4096 });
  assertEquals([(c.prompt as number[]).length, c.maxTokens], [3996, 100]);
  const huge = materialize({ ...r, promptLen: 10, outputLen: 9000 }, {
    vocabSize: 50,
    maxContext: 2048,
  });
  assertEquals([(huge.prompt as number[]).length, huge.maxTokens], [1, 2047]);
  assertEquals(
    materialize({ ...r, promptLen: undefined, promptText: "hi" }, { vocabSize: 5 }).prompt,
    "hi",
  );
  assertThrows(
    () => materialize({ ...r, promptLen: undefined, promptIds: [1, 300] }, { vocabSize: 256 }),
    /300 >= vocab 256/,
  );
});

Deno.test("flags: defaults, configurations, and refusals", () => {
  const f = parseServeBenchFlags([]);
  assertEquals([
    f.model,
    f.workload,
    f.lengths,
    f.seed,
    f["max-requests"],
    f["slo-ttft-ms"],
    f["slo-tbt-ms"],
  ], [
    "demo",
    "burst",
    "short",
    1,
    24,
    1300,
    250,
  ]);
  assertEquals(f.configs, [{ name: "default", flags: [] }]);
  assertEquals(f["reading-rate-dist"], { kind: "normal", mean: 15, sd: 4 });
  const g = parseServeBenchFlags([
    "--configs",
    "big=--gpu-kv-mb 512;small=--gpu-kv-mb 24 --sched 'tokenflow'",
    "--rate",
    "2",
    "--reading-rate-dist",
    "fixed:12",
  ]);
  assertEquals(g.configs, [
    { name: "big", flags: ["--gpu-kv-mb", "512"] },
    { name: "small", flags: ["--gpu-kv-mb", "24", "--sched", "tokenflow"] },
  ]);
  assertEquals([g.rate, g["reading-rate-dist"]], [2, { kind: "fixed", value: 12 }]);
  assertEquals(g.baseline, undefined, "no --baseline: the report looks for a config named fcfs");
  const withBase = ["--configs", "fcfs=--sched fcfs;tf=--sched tokenflow"];
  assertEquals(parseServeBenchFlags([...withBase, "--baseline", "tf"]).baseline, "tf");
  assertThrows(
    () => parseServeBenchFlags([...withBase, "--baseline", "reserve"]),
    UsageError,
    "--baseline must name one of the --configs",
  );
  assertEquals(splitFlags(` --a "b c" 'd' e `), ["--a", "b c", "d", "e"]);
  assertEquals(parseConfigs("base;  ;x=--pace off"), [{ name: "base", flags: [] }, {
    name: "x",
    flags: ["--pace", "off"],
  }]);
  assertEquals(parseConfigs("a,b, c").map((c) => [c.name, c.flags]), [["a", []], ["b", []], [
    "c",
    [],
  ]]);
  assertEquals(parseConfigs("x=--list 1,2").map((c) => [c.name, c.flags]), [["x", [
    "--list",
    "1,2",
  ]]]);
  assertThrows(() => parseConfigs("a=--host 10.0.0.1"), /not allowed/);
  assertThrows(() => parseConfigs("a=--port=80"), /not allowed/);
  assertThrows(() => parseConfigs("a=--model other"), /--model/);
  assertThrows(() => parseConfigs("a=;a=--x 1"), /twice/);
  assertThrows(() => parseConfigs(" ; "), /no configuration/);
  for (
    const bad of [["--workload", "trace"], ["--lengths", "huge"], ["--rate", "-1"], [
      "--bogus",
      "1",
    ], ["--reading-rate-dist", "normal"]]
  ) {
    assertThrows(() => parseServeBenchFlags(bad), UsageError, bad.join(" "));
  }
});

Deno.test("workload: documents are 1–2k tokens; a context bounds prompt + output as sent", () => {
  const seed = testSeed();
  const next = seededRandom(seed);
  for (let i = 0; i < 500; i++) {
    const { prompt } = drawLengths(next, "doc");
    assert(prompt >= 1024 && prompt <= 2048, `seed ${seed}: ${prompt}`);
  }
  assertEquals(boundByContext({ prompt: 1500, output: 100 }, undefined), {
    prompt: 1500,
    output: 100,
  });
  assertEquals(boundByContext({ prompt: 1500, output: 100 }, 2048), { prompt: 1500, output: 100 });
  assertEquals(boundByContext({ prompt: 1500, output: 100 }, 1000), { prompt: 900, output: 100 });
  assertEquals(boundByContext({ prompt: 1500, output: 600 }, 500), { prompt: 1, output: 499 });
  // The same lengths materialize() sends, so the workload file says what was sent.
  const w = generateWorkload({ ...BASE, seed, lengths: "doc", maxContext: 1200 });
  for (const r of w) {
    const m = materialize(r, { vocabSize: 100, maxContext: 1200 });
    assertEquals([(m.prompt as number[]).length, m.maxTokens], [r.promptLen, r.outputLen]);
  }
  // Bounding draws nothing: arrivals, readers and seeds are those of the unbounded workload.
  const free = generateWorkload({ ...BASE, seed, lengths: "doc" });
  assertEquals(
    w.map((r) => [r.arrivalS, r.readingRate, r.promptSeed]),
    free.map((r) => [
      r.arrivalS,
      r.readingRate,
      r.promptSeed,
    ]),
  );
});
