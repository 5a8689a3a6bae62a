// The exposition parser: the format's corner cases, malformed lines, and a randomized render →
// parse round trip.

import { formatValue, Histogram, Registry } from "../../../server/metrics/exposition.ts";
import { parsePrometheusText, sampleValue } from "../../../server/metrics/parse.ts";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";
import { rng, testSeed } from "../../helpers/random.ts";

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
