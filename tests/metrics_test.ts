// Prometheus text exposition: exact output for small cases, escaping, validation, the Sluice
// metric set's names, and a round trip through the parser the benchmark scrapes with.

import {
  Counter,
  createSluiceMetrics,
  escapeLabelValue,
  formatValue,
  Gauge,
  Histogram,
  parsePrometheusText,
  Registry,
  sampleValue,
  SLUICE_METRIC_NAMES,
} from "../server/metrics.ts";
import { assert, assertEquals, assertThrows } from "./helpers/testing.ts";
import { rng, testSeed } from "./helpers/random.ts";

Deno.test("metrics: counter exposition, unlabelled and labelled", () => {
  const registry = new Registry();
  const plain = registry.counter({ name: "jobs_total", help: "Jobs done." });
  const byStatus = registry.counter({
    name: "http_total",
    help: "Requests.",
    labelNames: ["status", "route"],
  });
  // Before anything happens: the unlabelled counter shows 0, the labelled one has no series.
  assertEquals(
    registry.render(),
    "# HELP jobs_total Jobs done.\n# TYPE jobs_total counter\njobs_total 0\n" +
      "# HELP http_total Requests.\n# TYPE http_total counter\n",
  );
  plain.inc();
  plain.inc(2.5);
  byStatus.inc({ status: "200", route: "/a" });
  byStatus.inc({ route: "/a", status: "429" }, 3); // label order in the call does not matter
  byStatus.inc({ status: "200", route: "/a" });
  assertEquals(
    registry.render(),
    [
      "# HELP jobs_total Jobs done.",
      "# TYPE jobs_total counter",
      "jobs_total 3.5",
      "# HELP http_total Requests.",
      "# TYPE http_total counter",
      'http_total{status="200",route="/a"} 2',
      'http_total{status="429",route="/a"} 3',
      "",
    ].join("\n"),
  );
  assertEquals(byStatus.get({ status: "429", route: "/a" }), 3);
  assertThrows(() => plain.inc(-1), RangeError);
  assertThrows(() => plain.inc(NaN), RangeError);
  assertThrows(() => plain.inc(Infinity), RangeError);
  assertThrows(() => byStatus.inc({ status: "200" }), /exactly/);
  assertThrows(() => byStatus.inc({ status: "200", route: "/", extra: "x" }), /exactly/);
  assertThrows(() => plain.inc({ status: "200" }), /exactly/);
});

Deno.test("metrics: gauge set/inc/dec and scrape-time callbacks", () => {
  const registry = new Registry();
  const depth = registry.gauge({ name: "queue_depth", help: "Waiting." });
  depth.set(4);
  depth.inc();
  depth.dec(3);
  assertEquals(depth.get(), 2);
  let used = 7;
  let calls = 0;
  const blocks = registry.gauge({
    name: "blocks_used",
    help: "Blocks.",
    labelNames: ["tier"],
    collect: (g) => {
      calls++;
      g.set({ tier: "device" }, used);
      g.set({ tier: "host" }, used * 2);
    },
  });
  assertEquals(calls, 0); // only evaluated when scraped
  const first = registry.render();
  assertEquals(
    first,
    [
      "# HELP queue_depth Waiting.",
      "# TYPE queue_depth gauge",
      "queue_depth 2",
      "# HELP blocks_used Blocks.",
      "# TYPE blocks_used gauge",
      'blocks_used{tier="device"} 7',
      'blocks_used{tier="host"} 14',
      "",
    ].join("\n"),
  );
  used = 9;
  assert(registry.render().includes('blocks_used{tier="host"} 18\n'));
  assertEquals(calls, 2);
  blocks.setCollect(undefined);
  used = 100;
  assert(registry.render().includes('blocks_used{tier="host"} 18\n'));
  depth.set(-1.25);
  assert(registry.render().includes("queue_depth -1.25\n"));
});

Deno.test("metrics: histogram buckets are cumulative, le inclusive, +Inf last", () => {
  const registry = new Registry();
  const h = registry.histogram({ name: "lat_seconds", help: "Latency.", buckets: [0.1, 0.5, 1] });
  for (const v of [0.05, 0.1, 0.3, 0.7, 0.7, 5]) h.observe(v);
  assertEquals(
    registry.render(),
    [
      "# HELP lat_seconds Latency.",
      "# TYPE lat_seconds histogram",
      'lat_seconds_bucket{le="0.1"} 2',
      'lat_seconds_bucket{le="0.5"} 3',
      'lat_seconds_bucket{le="1"} 5',
      'lat_seconds_bucket{le="+Inf"} 6',
      "lat_seconds_sum 6.85",
      "lat_seconds_count 6",
      "",
    ].join("\n"),
  );
  assertEquals(h.get(), { count: 6, sum: 0.05 + 0.1 + 0.3 + 0.7 + 0.7 + 5 });
  assertThrows(() => h.observe(NaN), RangeError);
});

Deno.test("metrics: an empty histogram renders zeros; labels come before le", () => {
  const registry = new Registry();
  registry.histogram({ name: "a_seconds", help: "A.", buckets: [1, 2] });
  const b = registry.histogram({
    name: "b_seconds",
    help: "B.",
    labelNames: ["kind"],
    buckets: [1, Infinity], // an explicit +Inf bound is the implicit one
  });
  b.observe({ kind: "x" }, 0.5);
  b.observe({ kind: "x" }, 3);
  assertEquals(
    registry.render(),
    [
      "# HELP a_seconds A.",
      "# TYPE a_seconds histogram",
      'a_seconds_bucket{le="1"} 0',
      'a_seconds_bucket{le="2"} 0',
      'a_seconds_bucket{le="+Inf"} 0',
      "a_seconds_sum 0",
      "a_seconds_count 0",
      "# HELP b_seconds B.",
      "# TYPE b_seconds histogram",
      'b_seconds_bucket{kind="x",le="1"} 1',
      'b_seconds_bucket{kind="x",le="+Inf"} 2',
      'b_seconds_sum{kind="x"} 3.5',
      'b_seconds_count{kind="x"} 2',
      "",
    ].join("\n"),
  );
});

Deno.test("metrics: label values and HELP text are escaped", () => {
  assertEquals(escapeLabelValue('a\\b"c\nd'), 'a\\\\b\\"c\\nd');
  const registry = new Registry();
  const c = registry.counter({
    name: "odd_total",
    help: 'Back\\slash, "quotes" and\nnewline.',
    labelNames: ["v"],
  });
  c.inc({ v: 'C:\\path "x"\nnext' });
  assertEquals(
    registry.render(),
    [
      '# HELP odd_total Back\\\\slash, "quotes" and\\nnewline.',
      "# TYPE odd_total counter",
      'odd_total{v="C:\\\\path \\"x\\"\\nnext"} 1',
      "",
    ].join("\n"),
  );
  const parsed = parsePrometheusText(registry.render());
  assertEquals(parsed.get("odd_total"), [{ labels: { v: 'C:\\path "x"\nnext' }, value: 1 }]);
});

Deno.test("metrics: names, label names and buckets are validated", () => {
  const registry = new Registry();
  assertThrows(() => registry.counter({ name: "1bad", help: "" }), /invalid metric name/);
  assertThrows(() => registry.counter({ name: "has-dash", help: "" }), /invalid metric name/);
  assertThrows(() => registry.counter({ name: "", help: "" }), /invalid metric name/);
  assert(registry.counter({ name: "ns:sub_total", help: "" }) instanceof Counter);
  assertThrows(
    () => registry.counter({ name: "x_total", help: "", labelNames: ["a b"] }),
    /label name/,
  );
  assertThrows(
    () => registry.counter({ name: "x_total", help: "", labelNames: ["__reserved"] }),
    /label name/,
  );
  assertThrows(
    () => registry.counter({ name: "x_total", help: "", labelNames: ["a", "a"] }),
    /duplicate/,
  );
  assertThrows(
    () => registry.histogram({ name: "h", help: "", labelNames: ["le"], buckets: [1] }),
    /label name/,
  );
  assertThrows(() => registry.histogram({ name: "h", help: "", buckets: [2, 1] }), /increasing/);
  assertThrows(() => registry.histogram({ name: "h", help: "", buckets: [1, 1] }), /increasing/);
  assertThrows(() => registry.histogram({ name: "h", help: "", buckets: [NaN] }), /increasing/);
  // Names collide, including a histogram's derived series.
  registry.gauge({ name: "g", help: "" });
  assertThrows(() => registry.counter({ name: "g", help: "" }), /already registered/);
  registry.histogram({ name: "lat", help: "", buckets: [1] });
  assertThrows(() => registry.gauge({ name: "lat_count", help: "" }), /already registered/);
  registry.gauge({ name: "q_sum", help: "" });
  assertThrows(() => registry.histogram({ name: "q", help: "", buckets: [1] }), /already/);
  assert(registry.get("g") instanceof Gauge);
});

Deno.test("metrics: value formatting", () => {
  assertEquals(formatValue(3), "3");
  assertEquals(formatValue(0.1 + 0.2), "0.30000000000000004"); // round-trips exactly
  assertEquals(formatValue(1e-7), "1e-7");
  assertEquals(formatValue(Infinity), "+Inf");
  assertEquals(formatValue(-Infinity), "-Inf");
  assertEquals(formatValue(NaN), "NaN");
});

Deno.test("metrics: the Sluice metric set has the contracted names, types and labels", () => {
  const registry = new Registry();
  const m = createSluiceMetrics(registry);
  const text = registry.render();
  const types = new Map(
    [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((match) => [match[1], match[2]]),
  );
  assertEquals(
    types,
    new Map([
      ["sluice_requests_total", "counter"],
      ["sluice_ttft_seconds", "histogram"],
      ["sluice_inter_token_seconds", "histogram"],
      ["sluice_queue_depth", "gauge"],
      ["sluice_running_requests", "gauge"],
      ["sluice_kv_blocks_used", "gauge"],
      ["sluice_kv_blocks_total", "gauge"],
      ["sluice_tokens_generated_total", "counter"],
      ["sluice_step_seconds", "histogram"],
      ["sluice_swaps_total", "counter"],
      ["sluice_preemptions_total", "counter"],
      ["sluice_planner_solves_total", "counter"],
      ["sluice_planner_solve_seconds", "histogram"],
      ["sluice_stall_seconds_total", "counter"],
    ]),
  );
  assertEquals(new Set(Object.values(SLUICE_METRIC_NAMES)), new Set(types.keys()));
  // Every HELP line is present and non-empty.
  assertEquals([...text.matchAll(/^# HELP \S+ \S.*$/gm)].length, 14);

  m.requests.inc({ status: "200" });
  m.requests.inc({ status: "200" });
  m.requests.inc({ status: "429" });
  m.ttft.observe(0.2);
  m.interToken.observe(0.05);
  m.queueDepth.set(3);
  m.runningRequests.set(2);
  m.kvBlocksUsed.setCollect((g) => {
    g.set({ tier: "device" }, 120);
    g.set({ tier: "host" }, 40);
  });
  m.kvBlocksTotal.set({ tier: "device" }, 256);
  m.tokensGenerated.inc(17);
  m.stepSeconds.observe(0.03);
  m.swaps.inc({ direction: "out" }, 2);
  m.preemptions.inc();
  m.plannerSolves.inc();
  m.plannerSolveSeconds.observe(0.004);
  m.stallSeconds.inc(0.7);

  const s = parsePrometheusText(registry.render());
  assertEquals(sampleValue(s, "sluice_requests_total", { status: "200" }), 2);
  assertEquals(sampleValue(s, "sluice_requests_total"), 3);
  assertEquals(sampleValue(s, "sluice_requests_total", { status: "500" }), undefined);
  assertEquals(sampleValue(s, "sluice_ttft_seconds_count"), 1);
  assertEquals(sampleValue(s, "sluice_ttft_seconds_bucket", { le: "0.1" }), 0);
  assertEquals(sampleValue(s, "sluice_ttft_seconds_bucket", { le: "0.25" }), 1);
  assertEquals(sampleValue(s, "sluice_inter_token_seconds_sum"), 0.05);
  assertEquals(sampleValue(s, "sluice_queue_depth"), 3);
  assertEquals(sampleValue(s, "sluice_running_requests"), 2);
  assertEquals(sampleValue(s, "sluice_kv_blocks_used", { tier: "device" }), 120);
  assertEquals(sampleValue(s, "sluice_kv_blocks_used", { tier: "host" }), 40);
  assertEquals(sampleValue(s, "sluice_kv_blocks_total", { tier: "device" }), 256);
  assertEquals(sampleValue(s, "sluice_kv_blocks_total", { tier: "host" }), 0); // ensured at 0
  assertEquals(sampleValue(s, "sluice_tokens_generated_total"), 17);
  assertEquals(sampleValue(s, "sluice_step_seconds_count"), 1);
  assertEquals(sampleValue(s, "sluice_swaps_total", { direction: "out" }), 2);
  assertEquals(sampleValue(s, "sluice_swaps_total", { direction: "in" }), 0);
  assertEquals(sampleValue(s, "sluice_preemptions_total"), 1);
  assertEquals(sampleValue(s, "sluice_planner_solves_total"), 1);
  assertEquals(sampleValue(s, "sluice_planner_solve_seconds_bucket", { le: "0.005" }), 1);
  assertEquals(sampleValue(s, "sluice_stall_seconds_total"), 0.7);
});

Deno.test("metrics: parser reads the format's corner cases and rejects malformed lines", () => {
  const text = [
    "# HELP x Some help.",
    "# TYPE x gauge",
    "",
    "x 1.5e3",
    'y{a="1", b="two words, with } and {"} -Inf 1700000000000',
    "z{} NaN",
    "w +Inf",
    'v{a="x",} 4',
  ].join("\n");
  const parsed = parsePrometheusText(text);
  assertEquals(parsed.get("x"), [{ labels: {}, value: 1500 }]);
  assertEquals(parsed.get("y"), [
    { labels: { a: "1", b: "two words, with } and {" }, value: -Infinity },
  ]);
  assert(Number.isNaN(parsed.get("z")![0].value));
  assertEquals(parsed.get("w")![0].value, Infinity);
  assertEquals(parsed.get("v"), [{ labels: { a: "x" }, value: 4 }]);
  assertThrows(() => parsePrometheusText("x"), /line 1: bad value/);
  assertThrows(() => parsePrometheusText("ok 1\nx abc"), /line 2: bad value/);
  assertThrows(() => parsePrometheusText('x{a="1} 2'), /unterminated/);
  assertThrows(() => parsePrometheusText('x{a="\\t"} 2'), /bad escape/);
  assertThrows(() => parsePrometheusText("x{a=1} 2"), /bad label/);
  assertThrows(() => parsePrometheusText("x 1 2 3"), /optional timestamp/);
  assertThrows(() => parsePrometheusText('{a="1"} 2'), /no metric name/);
});

Deno.test("metrics: randomized render → parse round trip", () => {
  const seed = testSeed();
  const next = rng(seed);
  try {
    const alphabet = ["a", "Z", "0", " ", "\\", '"', "\n", "{", "}", ",", "=", "é", "#"];
    const randomText = () =>
      Array.from(
        { length: Math.floor(next() * 8) },
        () => alphabet[Math.floor(next() * alphabet.length)],
      ).join("");
    const registry = new Registry();
    const counter = registry.counter({ name: "c_total", help: "c", labelNames: ["k", "m"] });
    const gauge = registry.gauge({ name: "g", help: "g", labelNames: ["k"] });
    const bounds = [0.001, 0.01, 0.1, 1, 10];
    const hist = registry.histogram({ name: "h", help: "h", labelNames: ["k"], buckets: bounds });
    // The model: what each series should hold.
    const counts = new Map<string, { labels: Record<string, string>; value: number }>();
    const gauges = new Map<string, number>();
    const observed = new Map<string, number[]>();
    for (let i = 0; i < 300; i++) {
      const k = randomText();
      const r = next();
      if (r < 0.4) {
        const labels = { k, m: randomText() };
        const by = Math.floor(next() * 5);
        counter.inc(labels, by);
        const key = JSON.stringify([labels.k, labels.m]);
        const entry = counts.get(key) ?? { labels, value: 0 };
        entry.value += by;
        counts.set(key, entry);
      } else if (r < 0.7) {
        const v = (next() - 0.5) * 1e6;
        gauge.set({ k }, v);
        gauges.set(k, v);
      } else {
        const v = Math.exp((next() - 0.5) * 20);
        hist.observe({ k }, v);
        observed.set(k, [...(observed.get(k) ?? []), v]);
      }
    }
    const parsed = parsePrometheusText(registry.render());
    const sortSamples = (list: { labels: Record<string, string>; value: number }[]) =>
      [...list].sort((a, b) => JSON.stringify(a.labels) < JSON.stringify(b.labels) ? -1 : 1);
    assertEquals(sortSamples(parsed.get("c_total") ?? []), sortSamples([...counts.values()]));
    assertEquals(
      sortSamples(parsed.get("g") ?? []),
      sortSamples([...gauges].map(([k, value]) => ({ labels: { k }, value }))),
    );
    for (const [k, values] of observed) {
      assertEquals(sampleValue(parsed, "h_count", { k }), values.length);
      assertEquals(sampleValue(parsed, "h_sum", { k }), values.reduce((a, b) => a + b, 0));
      for (const bound of [...bounds, Infinity]) {
        const le = formatValue(bound);
        assertEquals(
          sampleValue(parsed, "h_bucket", { k, le }),
          values.filter((v) => v <= bound).length,
          `bucket le=${le} of k=${JSON.stringify(k)}`,
        );
      }
    }
    assert(hist instanceof Histogram);
  } catch (e) {
    console.error(`metrics round trip failed with seed ${seed} (SLUICE_TEST_SEED=${seed})`);
    throw e;
  }
});
