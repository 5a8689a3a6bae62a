// Prometheus text exposition: exact output for small cases, escaping, validation and value
// formatting.

import {
  Counter,
  escapeLabelValue,
  formatValue,
  Gauge,
  Registry,
} from "../../../server/metrics/exposition.ts";
import { parsePrometheusText } from "../../../server/metrics/parse.ts";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";

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
