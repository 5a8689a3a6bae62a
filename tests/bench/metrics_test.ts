// The serving benchmark's arithmetic on hand-made token timelines: reader playout, stalls, buffer
// occupancy, TokenFlow's effective throughput (10%/20% rule), OrbitFlow's TBT/TPOT attainment,
// percentiles, the edge cases (zero-output, refused, failed, cancelled, timed-out requests), the
// /metrics parser and summary, and the report's table, verdict and SVG charts.

import {
  bufferEntryTimes,
  percentile,
  requestMetrics,
  summarize,
  tokenWeight,
  ttftCdf,
} from "../../bench/serve/metrics.ts";
import { bufferChart } from "../../bench/serve/charts.ts";
import {
  bufferAtArrivals,
  bufferSeries,
  displayTimes,
  Reader,
  stallMs,
  stallsMs,
} from "../../bench/serve/playout.ts";
import { parsePrometheus, type Scrape } from "../../bench/serve/prometheus.ts";
import type { RequestRecord } from "../../bench/serve/record.ts";
import {
  baselineName,
  buildReport,
  goalsTable,
  resultsTable,
  verdict,
} from "../../bench/serve/report.ts";
import type { ConfigResult } from "../../bench/serve/run.ts";
import { summarizeServerMetrics } from "../../bench/serve/server_metrics.ts";
import { lineChart, niceTicks } from "../../bench/serve/svg.ts";
import { assert, assertEquals, assertThrows } from "../helpers/testing.ts";

const close = (got: number | null, want: number, what: string) =>
  assert(
    got !== null && Math.abs(got - want) <= 1e-9 * Math.max(1, Math.abs(want)),
    `${what}: got ${got}, want ${want}`,
  );

/** A record with display times from the reader model, as the client produces them. */
function rec(p: Partial<RequestRecord> & { id: number; arrivalsMs: number[] }): RequestRecord {
  const rate = p.readingRate ?? 10;
  return {
    outcome: "ok",
    sentAtMs: 0,
    endAtMs: p.arrivalsMs.length ? p.arrivalsMs[p.arrivalsMs.length - 1] : 0,
    displayMs: displayTimes(p.arrivalsMs, rate),
    readingRate: rate,
    sloTtftMs: 1000,
    sloTbtMs: 250,
    maxTokens: p.arrivalsMs.length,
    ...p,
  };
}

Deno.test("percentile: linear interpolation between closest ranks, null on no data", () => {
  const v = [4, 1, 3, 2];
  assertEquals(percentile(v, 0), 1);
  assertEquals(percentile(v, 50), 2.5);
  assertEquals(percentile(v, 100), 4);
  close(percentile(v, 99), 3.97, "p99");
  close(percentile(v, 95), 3.85, "p95");
  assertEquals(percentile([7], 99), 7);
  assertEquals(percentile([], 50), null);
  assertEquals(v, [4, 1, 3, 2], "input left unsorted");
  assertThrows(() => percentile(v, 101));
});

Deno.test("playout: display times, stalls and buffer on a timeline with a gap", () => {
  // 10 tokens/s = one token per 100 ms. Three tokens quickly, then a 380 ms hole, then two.
  const arrivals = [100, 110, 120, 600, 610];
  const display = displayTimes(arrivals, 10);
  assertEquals(display, [100, 200, 300, 600, 700]);
  // Token 3 was due at 400 and came at 600: 200 ms stall; token 4 came before it was due.
  assertEquals(stallMs(arrivals, display, 10), 200);
  assertEquals(bufferAtArrivals(arrivals, display), [0, 0, 1, 0, 0]);
  assertEquals(bufferSeries(arrivals, display), [
    [100, 0],
    [110, 1],
    [120, 2],
    [200, 1],
    [300, 0],
    [600, 0],
    [610, 1],
    [700, 0],
  ]);
  assertEquals(stallsMs(arrivals, display, 10), [0, 0, 0, 200, 0]);
  const online = new Reader(10);
  assertEquals(
    arrivals.map((a) => online.arrive(a)),
    display,
    "online reader matches the batch form",
  );
  assertThrows(() => new Reader(0));
});

Deno.test("playout: a burst fills the buffer one token per reading interval", () => {
  const arrivals = Array(20).fill(0);
  const display = displayTimes(arrivals, 4);
  assertEquals(display, arrivals.map((_, j) => j * 250));
  // Token j arrives with j-1 unread tokens ahead of it (token 0 is read the instant it arrives).
  assertEquals(bufferAtArrivals(arrivals, display), arrivals.map((_, j) => Math.max(0, j - 1)));
  assertEquals(stallMs(arrivals, display, 4), 0);
});

Deno.test("stalled requests: pacing jitter costs once, a slow stream keeps adding up", () => {
  // Paced at the reading rate (100 ms) with every other token 3 ms late: the reader's clock moves
  // 3 ms later once and the rest arrive on time.
  const jitter = requestMetrics(
    rec({ id: 0, arrivalsMs: Array.from({ length: 40 }, (_, j) => 100 * j + (j % 2) * 3) }),
  );
  assertEquals([jitter.stallMs, jitter.stalled], [3, false]);
  // Delivered 3% slower than read (103 ms per token): 39 stalls of 3 ms pass one 100 ms interval.
  const slow = requestMetrics(
    rec({ id: 1, arrivalsMs: Array.from({ length: 40 }, (_, j) => 103 * j) }),
  );
  assertEquals([slow.stallMs, slow.stalled], [39 * 3, true]);
  const short = requestMetrics(
    rec({ id: 2, arrivalsMs: Array.from({ length: 10 }, (_, j) => 103 * j) }),
  );
  assertEquals([short.stallMs, short.stalled], [27, false]);
  const s = summarize([
    rec({ id: 0, arrivalsMs: [0, 100, 203] }),
    rec({ id: 1, arrivalsMs: [0, 100, 300] }),
  ]);
  assertEquals(s.stalledRequests, 1);
  close(s.stallTotalS, 0.103, "3 ms + 100 ms of stall");
});

Deno.test("effective throughput: TokenFlow's 10%/20% rule, exact weights", () => {
  // L = 100: full weight up to 10 buffered, half at 15, zero from 20.
  assertEquals([0, 10, 11, 15, 19, 20, 25].map((b) => tokenWeight(b, 100)), [
    1,
    1,
    0.9,
    0.5,
    0.1,
    0,
    0,
  ]);
  // L = 20: thresholds 2 and 4 tokens.
  assertEquals([0, 2, 3, 4].map((b) => tokenWeight(b, 20)), [1, 1, 0.5, 0]);
  assertEquals(tokenWeight(0, 0), 0, "no output, no weight");
  // The burst of 20 at once: buffers 0,0,1,2,3,4..18 -> weights 1,1,1,1,0.5,0... = 4.5 tokens.
  const burst = rec({ id: 0, arrivalsMs: Array(20).fill(0) });
  assertEquals(requestMetrics(burst).effectiveTokens, 4.5);
  // Arriving exactly at the reading pace keeps the buffer empty: every token counts.
  const paced = rec({ id: 1, arrivalsMs: Array.from({ length: 50 }, (_, j) => 100 + j * 100) });
  assertEquals(requestMetrics(paced).effectiveTokens, 50);
});

Deno.test("effective throughput from the server's buffer: generation far ahead of the reader", () => {
  // The server generates 10 tokens in 10 ms and paces them out at the reader's 10 tokens/s: they
  // arrive (and are read) at 100, 200, ..., 1000 ms. Arrivals alone show an empty buffer.
  const arrivalsMs = Array.from({ length: 10 }, (_, j) => 100 + 100 * j);
  const generatedMs = Array.from({ length: 10 }, (_, j) => 100 + j);
  const client = rec({ id: 0, arrivalsMs, endAtMs: 1000 });
  const server = rec({ id: 0, arrivalsMs, generatedMs, endAtMs: 1000 });
  assertEquals(bufferAtArrivals(arrivalsMs, client.displayMs), Array(10).fill(0));
  // At token j's generation (100 + j ms) only token 0 has been read: j - 1 wait (j >= 1).
  assertEquals(bufferAtArrivals(generatedMs, server.displayMs), [0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
  // L = 10: weight 1 up to 1 buffered, 0 from 2: tokens 0, 1, 2 count.
  const m = requestMetrics(server);
  assertEquals([m.bufferSource, m.effectiveTokens, m.tokens], ["server", 3, 10]);
  // Without the server's timing (another server): the client-side buffer, effective = raw.
  const c = requestMetrics(client);
  assertEquals([c.bufferSource, c.effectiveTokens], ["client", 10]);
  // TTFT, TBT and stalls stay on arrivals either way.
  assertEquals([m.ttftMs, m.stallMs, m.gapsMs], [c.ttftMs, c.stallMs, c.gapsMs]);

  const s = summarize([server]);
  assertEquals([s.spanS, s.rawTokensPerS, s.effectiveTokensPerS], [1, 10, 3]);
  assertEquals(s.bufferSource, "server");
  assertEquals(summarize([client]).effectiveTokensPerS, 10);
  assertEquals(summarize([client]).bufferSource, "client");
  assertEquals(summarize([server, { ...client, id: 1 }]).bufferSource, "mixed");
  assertEquals(summarize([rec({ id: 0, arrivalsMs: [] })]).bufferSource, null);

  // The plot follows the same buffer: up to 9 unread just after 109 ms.
  const chart = bufferChart({
    config: { name: "paced", flags: [] },
    records: [server],
    scrapes: [],
    scrapeFailures: 0,
    summary: s,
    server: null,
    warmupErrors: [],
    wallS: 1,
  });
  assert(chart.includes("generated at the server but not yet read"), chart);
  assert(!chart.includes("all empty"));
});

Deno.test("buffer entry times: the server's, kept in order and never after arrival; else arrivals", () => {
  const r = rec({ id: 0, arrivalsMs: [10, 20, 30, 40], generatedMs: [5, 3, 35, 38] });
  // 3 is raised to 5 (in order), 35 capped at its arrival 30.
  assertEquals(bufferEntryTimes(r), { times: [5, 5, 30, 38], source: "server" });
  // A count that does not match the arrivals is not trusted.
  const short = rec({ id: 1, arrivalsMs: [10, 20], generatedMs: [5] });
  assertEquals(bufferEntryTimes(short), { times: [10, 20], source: "client" });
});

Deno.test("SLO attainment: TBT per token, TPOT per request (OrbitFlow)", () => {
  const m = requestMetrics(rec({ id: 0, arrivalsMs: [100, 200, 600, 650], sloTbtMs: 250 }));
  assertEquals(m.gapsMs, [100, 400, 50]);
  assertEquals(m.tbtMet, 2, "the 400 ms gap misses a 250 ms TBT SLO");
  assertEquals(m.tpotMs, 550 / 3);
  assertEquals(m.tpotMet, true, "the average (183 ms) is within 250 ms although one gap is not");
  const tight = requestMetrics(rec({ id: 1, arrivalsMs: [100, 200, 600, 650], sloTbtMs: 150 }));
  assertEquals([tight.tbtMet, tight.tpotMet], [2, false]);
  const single = requestMetrics(rec({ id: 2, arrivalsMs: [300] }));
  assertEquals([single.tpotMs, single.tpotMet, single.gapsMs], [null, null, []]);
});

Deno.test("SLO goodput: ended as asked, TTFT and TPOT both met; one token is judged by TTFT", () => {
  const m = (p: Partial<RequestRecord>) =>
    requestMetrics(rec({ id: 0, arrivalsMs: [100, 200, 300], sloTtftMs: 500, ...p })).sloMet;
  assertEquals(m({}), true);
  assertEquals(m({ sloTtftMs: 50 }), false, "first token late");
  assertEquals(m({ sloTbtMs: 80 }), false, "TPOT 100 ms over an 80 ms TBT SLO");
  assertEquals(m({ arrivalsMs: [100, 200, 900], sloTbtMs: 500 }), true, "one slow gap, TPOT 400");
  assertEquals(m({ outcome: "cancelled" }), true, "the reader hung up as the workload said");
  assertEquals(m({ outcome: "timeout" }), false, "on time until it timed out: not served");
  assertEquals(m({ outcome: "failed" }), false);
  assertEquals(m({ arrivalsMs: [100] }), true, "one token: no TPOT, TTFT decides");
  assertEquals(m({ arrivalsMs: [], maxTokens: 0 }), null, "asked for nothing: not judged");
  assertEquals(m({ outcome: "refused", arrivalsMs: [], maxTokens: 8 }), false);
});

Deno.test("edge cases: zero-output, refused, failed, cancelled and timed-out requests", () => {
  const zero = requestMetrics(
    rec({ id: 0, arrivalsMs: [], maxTokens: 0, sentAtMs: 5, endAtMs: 40 }),
  );
  assertEquals(zero, {
    id: 0,
    outcome: "ok",
    tokens: 0,
    bufferSource: "client",
    ttftMs: null,
    tpotMs: null,
    gapsMs: [],
    stallMs: 0,
    stalled: false,
    effectiveTokens: 0,
    tbtMet: 0,
    tpotMet: null,
    ttftMet: null,
    sloMet: null,
  });
  const refused = requestMetrics(
    rec({ id: 1, outcome: "refused", httpStatus: 429, arrivalsMs: [], maxTokens: 64 }),
  );
  assertEquals([refused.tokens, refused.ttftMs, refused.ttftMet, refused.effectiveTokens], [
    0,
    null,
    false,
    0,
  ]);
  const failed = requestMetrics(rec({ id: 2, outcome: "failed", arrivalsMs: [], maxTokens: 8 }));
  assertEquals(failed.ttftMet, false);
  const cancelled = requestMetrics(
    rec({ id: 3, outcome: "cancelled", arrivalsMs: [50, 150], maxTokens: 64 }),
  );
  // A cancelled request's output length is what it received (2), not what it asked for.
  assertEquals([cancelled.tokens, cancelled.effectiveTokens, cancelled.ttftMet], [2, 2, true]);
  assertThrows(() => requestMetrics({ ...rec({ id: 4, arrivalsMs: [1, 2] }), displayMs: [1] }));
});

Deno.test("summarize: a mixed run with every outcome, exact numbers", () => {
  const records: RequestRecord[] = [
    // ok, 5 tokens, 200 ms stall, buffers 0,0,1,0,0 -> weights 1,1,0,1,1 (L = 5: 1 buffered is 20%).
    rec({
      id: 0,
      arrivalsMs: [100, 110, 120, 600, 610],
      sentAtMs: 0,
      endAtMs: 700,
      usageCompletionTokens: 5,
    }),
    rec({
      id: 1,
      outcome: "refused",
      httpStatus: 429,
      retryAfterS: 2,
      arrivalsMs: [],
      maxTokens: 32,
      sentAtMs: 100,
      endAtMs: 105,
    }),
    // Cancelled after 2 tokens, with a TBT SLO its only gap misses.
    rec({
      id: 2,
      outcome: "cancelled",
      arrivalsMs: [50, 150],
      sloTbtMs: 50,
      maxTokens: 32,
      sentAtMs: 200,
      endAtMs: 360,
    }),
    rec({ id: 3, arrivalsMs: [], maxTokens: 0, sentAtMs: 300, endAtMs: 320 }),
    rec({
      id: 4,
      outcome: "failed",
      httpStatus: 500,
      arrivalsMs: [],
      maxTokens: 16,
      sentAtMs: 400,
      endAtMs: 420,
    }),
    // One token after 3 s, then the per-request timeout.
    rec({
      id: 5,
      outcome: "timeout",
      arrivalsMs: [3000],
      maxTokens: 16,
      sentAtMs: 500,
      endAtMs: 5000,
    }),
  ];
  const s = summarize(records);
  assertEquals(
    [s.requests, s.completed, s.refused, s.failed, s.cancelled, s.timedOut],
    [6, 2, 1, 1, 1, 1],
  );
  assertEquals(s.tokens, 8);
  assertEquals(s.effectiveTokens, 4 + 2 + 1);
  assertEquals(s.spanS, 5);
  assertEquals(s.rawTokensPerS, 8 / 5);
  assertEquals(s.effectiveTokensPerS, 7 / 5);
  assertEquals([s.ttftMs.p50, s.ttftMs.mean], [100, (100 + 50 + 3000) / 3]);
  close(s.ttftMs.p99, 100 + 0.98 * 2900, "TTFT p99");
  assertEquals(s.tbtMs.p50, 10);
  assertEquals(s.stallTotalS, 0.2);
  assertEquals([s.stallPerRequestMeanS, s.stallPerRequestMaxS, s.stalledRequests], [
    0.2 / 3,
    0.2,
    1,
  ]);
  // TBT: request 0 has gaps 10,10,480,10 (3 within 250 ms); request 2's 100 ms gap misses 50 ms.
  assertEquals(s.tbtAttainment, 3 / 5);
  // TPOT: request 0 averages 127.5 ms (met), request 2 100 ms against 50 ms (missed).
  assertEquals(s.tpotAttainment, 1 / 2);
  // TTFT within 1 s: requests 0 and 2 yes; 1 (refused), 4 (failed), 5 (3 s) no; 3 asked for nothing.
  assertEquals(s.ttftAttainment, 2 / 5);
  // Both SLOs: request 0 (TTFT 100 ms, TPOT 127.5 ms) only; 2 misses its TPOT, 5 timed out.
  assertEquals([s.sloGoodRequests, s.sloGoodput], [1, 1 / 5]);
  assertEquals(ttftCdf(records), [[0.05, 1 / 6], [0.1, 2 / 6], [3, 3 / 6]]);
  assertEquals(s.tokenCountMismatches, 0);
  // A stream whose chunks the client counted differently from the server's usage is flagged.
  const off = summarize([
    ...records,
    rec({ id: 6, arrivalsMs: [10, 20], usageCompletionTokens: 3 }),
  ]);
  assertEquals(off.tokenCountMismatches, 1);
});

Deno.test("summarize: no requests at all gives nulls, not NaN", () => {
  const s = summarize([]);
  assertEquals([s.requests, s.tokens, s.spanS], [0, 0, 0]);
  assertEquals([
    s.rawTokensPerS,
    s.effectiveTokensPerS,
    s.ttftMs.p50,
    s.tbtAttainment,
    s.stallPerRequestMeanS,
  ], [
    null,
    null,
    null,
    null,
    null,
  ]);
});

const EXPOSITION = `# HELP sluice_kv_blocks_used KV blocks in use
# TYPE sluice_kv_blocks_used gauge
sluice_kv_blocks_used{tier="device"} 12
sluice_kv_blocks_used{tier="host"} 3
sluice_kv_blocks_total{tier="device"} 64
sluice_swaps_total{direction="in"} 5 1700000000000
sluice_swaps_total{direction="out"} 7
sluice_planner_solve_seconds_bucket{le="0.01"} 2
sluice_planner_solve_seconds_bucket{le="+Inf"} 4
sluice_planner_solve_seconds_sum 0.02
sluice_planner_solve_seconds_count 4
odd_label{path="a\\"b\\\\c\\nd",x="1"} -Inf

other_metric NaN
inf_metric +Inf
`;

Deno.test("prometheus: text format samples, labels with escapes, special values", () => {
  const s = parsePrometheus(EXPOSITION);
  assertEquals(s.length, 12);
  assertEquals(s[0], { name: "sluice_kv_blocks_used", labels: { tier: "device" }, value: 12 });
  assertEquals(
    s[3],
    { name: "sluice_swaps_total", labels: { direction: "in" }, value: 5 },
    "timestamp ignored",
  );
  assertEquals(s[6], {
    name: "sluice_planner_solve_seconds_bucket",
    labels: { le: "+Inf" },
    value: 4,
  });
  assertEquals(s[11].value, Infinity);
  assertEquals(s[9], {
    name: "odd_label",
    labels: { path: 'a"b\\c\nd', x: "1" },
    value: -Infinity,
  });
  assert(Number.isNaN(s[10].value));
  assertThrows(() => parsePrometheus("bad{tier=device} 1"));
  assertThrows(() => parsePrometheus("sluice_x abc"));
});

Deno.test("server metrics: per-tier series and counter deltas; absent metrics are null", () => {
  const scrape = (tMs: number, text: string): Scrape => ({ tMs, samples: parsePrometheus(text) });
  const scrapes = [
    scrape(
      0,
      `sluice_kv_blocks_used{tier="device"} 0\nsluice_kv_blocks_total{tier="device"} 64
sluice_swaps_total{direction="in"} 5\nsluice_preemptions_total 2
sluice_planner_solve_seconds_sum 0.5\nsluice_planner_solve_seconds_count 10\nsluice_queue_depth 0`,
    ),
    scrape(
      250,
      `sluice_kv_blocks_used{tier="device"} 40\nsluice_kv_blocks_used{tier="host"} 8
sluice_kv_blocks_total{tier="device"} 64\nsluice_kv_blocks_total{tier="host"} 128
sluice_swaps_total{direction="in"} 9\nsluice_swaps_total{direction="out"} 3\nsluice_preemptions_total 6
sluice_planner_solve_seconds_sum 0.53\nsluice_planner_solve_seconds_count 16\nsluice_queue_depth 7`,
    ),
    scrape(
      500,
      `sluice_kv_blocks_used{tier="device"} 20\nsluice_kv_blocks_used{tier="host"} 0
sluice_swaps_total{direction="in"} 11\nsluice_swaps_total{direction="out"} 4\nsluice_preemptions_total 6
sluice_planner_solve_seconds_sum 0.56\nsluice_planner_solve_seconds_count 22\nsluice_queue_depth 1`,
    ),
  ];
  const m = summarizeServerMetrics(scrapes);
  assertEquals(m.scrapes, 3);
  assertEquals(m.kvBlocks, [
    { tier: "device", total: 64, points: [[0, 0], [0.25, 40], [0.5, 20]] },
    { tier: "host", total: 128, points: [[0.25, 8], [0.5, 0]] },
  ]);
  // "out" first appears at 250 ms, so its delta starts there.
  assertEquals(m.swaps, { in: 6, out: 1 });
  assertEquals(m.preemptions, 4);
  assertEquals(m.plannerSolves, 12, "from the histogram count when there is no solves counter");
  close(m.plannerSolveMeanMs, (0.06 / 12) * 1000, "mean solve");
  assertEquals(m.peakQueueDepth, 7);
  assertEquals([m.peakRunning, m.tokensGenerated], [null, null]);
  assertEquals(summarizeServerMetrics([]).swaps, null);
});

/** A tag-balance check: one <svg> root, every tag closed in order, attributes quoted, no stray
 * ampersands. Enough to catch broken output without an XML library. */
function assertXmlish(svg: string) {
  assert(svg.trimStart().startsWith("<svg "), "starts with <svg>");
  assert(/xmlns="http:\/\/www\.w3\.org\/2000\/svg"/.test(svg), "svg namespace");
  assert(!/&(?!(amp|lt|gt|quot|apos|#\d+);)/.test(svg), "unescaped &");
  const stack: string[] = [];
  let roots = 0;
  for (const m of svg.matchAll(/<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/g)) {
    const [, closing, name, , self] = m;
    if (closing) assertEquals(stack.pop(), name, `closing </${name}>`);
    else if (!self) {
      if (stack.length === 0) roots++;
      stack.push(name);
    } else if (stack.length === 0) roots++;
  }
  assertEquals(stack, [], "all tags closed");
  assertEquals(roots, 1, "one root element");
  // Every "<" starts a tag the pattern above accepted (no malformed attributes).
  const tags = svg.match(/</g)?.length ?? 0;
  const parsed =
    [...svg.matchAll(/<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/g)].length;
  assertEquals(parsed, tags, "every tag well formed");
}

Deno.test("svg: a line chart is standalone SVG with axes, labels, legend and every series", () => {
  const svg = lineChart({
    title: "Buffer <&> test",
    xLabel: "time (s)",
    yLabel: "tokens",
    series: [
      { name: "alpha", points: [[0, 0], [1, 5], [2, 3]], step: true },
      { name: 'b"eta', points: [[0.5, 1], [3, 9]], dashed: true },
      { name: "empty", points: [] },
    ],
  });
  assertXmlish(svg);
  for (
    const s of [
      "Buffer &lt;&amp;&gt; test",
      "time (s)",
      "tokens",
      'data-name="alpha"',
      'data-name="b&quot;eta"',
    ]
  ) {
    assert(svg.includes(s), `contains ${s}`);
  }
  assertEquals((svg.match(/class="series"/g) ?? []).length, 2, "two non-empty series drawn");
  assert(
    svg.includes(">alpha</text>") && svg.includes(">empty</text>"),
    "legend lists every series",
  );
  assert(svg.includes('class="x-ticks"') && svg.includes('class="y-ticks"'), "tick labels");
  // The step series doubles its points: (0,0) (1,0) (1,5) (2,5) (2,3).
  const alpha = /data-name="alpha"[^>]*points="([^"]*)"/.exec(svg)![1].split(" ");
  assertEquals(alpha.length, 5);
  const empty = lineChart({ title: "nothing", xLabel: "x", yLabel: "y", series: [] });
  assertXmlish(empty);
  assert(empty.includes("no data"));
  assertEquals(niceTicks(0, 26), [0, 10, 20, 30]);
  assertEquals(niceTicks(0, 1), [0, 0.2, 0.4, 0.6, 0.8, 1]);
});

function fakeResult(
  name: string,
  records: RequestRecord[],
  extra: Partial<ConfigResult> = {},
): ConfigResult {
  return {
    config: { name, flags: ["--gpu-kv-mb", name === "big" ? "512" : "24"] },
    records,
    scrapes: [],
    scrapeFailures: 0,
    summary: summarize(records),
    server: summarizeServerMetrics([
      {
        tMs: 0,
        samples: parsePrometheus(
          `sluice_kv_blocks_used{tier="device"} 1\nsluice_preemptions_total 0`,
        ),
      },
      {
        tMs: 500,
        samples: parsePrometheus(
          `sluice_kv_blocks_used{tier="device"} 9\nsluice_preemptions_total ${
            name === "big" ? 0 : 5
          }`,
        ),
      },
    ]),
    warmupErrors: [],
    wallS: 1,
    ...extra,
  };
}

Deno.test("report: side-by-side table, verdict with reasons, and charts naming each config", () => {
  const paced = (id: number, start: number) =>
    rec({
      id,
      sentAtMs: start,
      arrivalsMs: Array.from({ length: 20 }, (_, j) => 100 + j * 100),
      endAtMs: start + 2100,
    });
  const big = fakeResult("big", [paced(0, 0), paced(1, 50)]);
  // "small" stalls: its tokens come in two bursts with a long hole, and one request is refused.
  const small = fakeResult("small", [
    rec({ id: 0, arrivalsMs: [...Array(10).fill(100), ...Array(10).fill(4000)], endAtMs: 4000 }),
    rec({
      id: 1,
      outcome: "refused",
      httpStatus: 429,
      arrivalsMs: [],
      maxTokens: 20,
      sentAtMs: 50,
      endAtMs: 60,
    }),
  ]);
  const broken = fakeResult("broken", [], {
    summary: null,
    server: null,
    error: "server exited (code 3) before listening\nlog",
  });
  const results = [big, small, broken];
  const table = resultsTable(results);
  const row = (label: string) => table.split("\n").find((l) => l.startsWith(`| ${label} |`))!;
  assertEquals(row("refused (429)"), "| refused (429) | **0** | 1 | — |");
  assert(row("preemptions").startsWith("| preemptions | **0** | 5 |"), row("preemptions"));
  assert(row("stall time, total (s)").includes("| **0.00** |"), row("stall time, total (s)"));
  assert(!table.includes("swaps"), "metrics nobody reported are left out");
  assert(!table.includes("≠ usage"), "no token-count row while counts agree");
  const skewed = fakeResult("skewed", [
    rec({ id: 0, arrivalsMs: [10, 20], usageCompletionTokens: 3 }),
  ]);
  assert(
    resultsTable([big, skewed]).includes("| requests whose token count ≠ usage | **0** | 1 |"),
  );
  const v = verdict(results).join("\n");
  assert(v.includes("**`big` has the highest effective throughput**"), v);
  assert(/Why: .*stall .*refused 0 vs 1/.test(v), v);
  assert(v.includes("`broken` could not be measured: server exited (code 3) before listening"), v);
  const report = buildReport({
    title: "t",
    context: ["c"],
    results,
    replayCommand: "deno task bench serve ...",
  });
  // Per configuration measured: its buffer plot and its KV plot; all configurations' KV together.
  assertEquals([...report.svgs.keys()].sort(), [
    "buffer_big.svg",
    "buffer_small.svg",
    "kv_big.svg",
    "kv_blocks.svg",
    "kv_small.svg",
    "ttft_cdf.svg",
  ]);
  assert(report.svgs.get("kv_small.svg")!.includes('data-name="small device"'));
  assert(!report.svgs.get("kv_small.svg")!.includes('data-name="big device"'));
  assert(
    report.markdown.includes("### `broken`\n\nNo requests were measured (it could not be run)."),
  );
  for (const svg of report.svgs.values()) assertXmlish(svg);
  const cdf = report.svgs.get("ttft_cdf.svg")!;
  assert(
    cdf.includes('data-name="big"') && cdf.includes('data-name="small"'),
    "CDF has both configs",
  );
  assert(report.svgs.get("buffer_small.svg")!.includes('data-name="#0 (10 tok/s)"'));
  assert(report.svgs.get("kv_blocks.svg")!.includes('data-name="small device"'));
  for (const f of report.svgs.keys()) {
    assert(report.markdown.includes(`](${f})`), `markdown links ${f}`);
  }
});

Deno.test("report: goals against the baseline, each met or not, with exact ratios", () => {
  const paced = (id: number) =>
    rec({ id, arrivalsMs: Array.from({ length: 10 }, (_, j) => 100 + j * 100) });
  const withSummary = (name: string, records: RequestRecord[], over: object): ConfigResult => {
    const r = fakeResult(name, records);
    return { ...r, summary: { ...r.summary!, ...over } };
  };
  const q = (p99: number) => ({ p50: p99 / 2, p95: p99, p99, mean: p99 / 2 });
  const base = withSummary("fcfs", [paced(0), paced(1)], {
    ttftMs: q(4000),
    effectiveTokensPerS: 10,
    rawTokensPerS: 20,
    stallTotalS: 8,
    tbtAttainment: 0.8,
  });
  // Request 1, which the baseline served, is refused here.
  const tf = withSummary("tf", [
    paced(0),
    rec({ id: 1, outcome: "refused", arrivalsMs: [], maxTokens: 10 }),
  ], {
    ttftMs: q(1000),
    effectiveTokensPerS: 16,
    rawTokensPerS: 17,
    stallTotalS: 4,
    tbtAttainment: 0.95,
  });
  const broken = fakeResult("broken", [], { summary: null, server: null, error: "no start" });
  assertEquals(baselineName([tf, base]), "fcfs", "a configuration named fcfs is the default");
  assertEquals(baselineName([tf, base], "tf"), "tf");
  assertEquals(baselineName([tf]), null);
  const table = goalsTable([base, tf, broken]);
  assertEquals(table.slice(2), [
    "| goal | target | `fcfs` (baseline) | `tf` | `broken` |",
    "|---|---|---:|---:|---:|",
    "| TTFT p99 | ≤ 0.5× | 4.00 s | 0.25× (1.00 s) met | not measured |",
    "| effective tokens/s | ≥ 1.5× | 10.0 | 1.60× (16.0) met | not measured |",
    "| stall time, total | ≤ 0.25× | 8.00 s | 0.50× (4.00 s) **not met** | not measured |",
    "| TBT SLO attainment | ≥ 90% | 80.0% | 95.0% met | not measured |",
    "| raw tokens/s | ≥ 0.9× | 20.0 | 0.85× (17.0) **not met** | not measured |",
    "| refused or failed that the baseline served | 0 | — | 1 **not met** | not measured |",
    "| **goals met** | | | 3 of 6 | 0 of 6 |",
  ]);
  // Against a baseline with no stall at all, only no stall meets the stall goal.
  const calm = withSummary("calm", [paced(0)], { stallTotalS: 0 });
  const row = (t: string[], label: string) => t.find((l) => l.startsWith(`| ${label} |`));
  assertEquals(
    row(
      goalsTable([calm, withSummary("x", [paced(0)], { stallTotalS: 0 })], "calm"),
      "stall time, total",
    ),
    "| stall time, total | ≤ 0.25× | 0.00 s | 0.00 s vs 0.00 s met |",
  );
  assertEquals(
    row(
      goalsTable([calm, withSummary("y", [paced(0)], { stallTotalS: 0.5 })], "calm"),
      "stall time, total",
    ),
    "| stall time, total | ≤ 0.25× | 0.00 s | 0.50 s vs 0.00 s **not met** |",
  );
  // No baseline, or one that did not run: said, not guessed.
  assert(goalsTable([tf]).join("\n").includes("--baseline NAME"));
  assert(goalsTable([broken, tf], "broken").join("\n").includes("could not be measured"));
  assert(goalsTable([tf], "nope").join("\n").includes("not one of the configurations"));
  const md = buildReport({ title: "t", context: [], results: [base, tf], replayCommand: "x" })
    .markdown;
  assert(md.includes("## Goals against the baseline\n\nEach configuration against `fcfs`"), md);
});

Deno.test("report: paused peak, recomputed tokens, planner solves and the server's effective count", () => {
  const scrape = (tMs: number, text: string): Scrape => ({ tMs, samples: parsePrometheus(text) });
  const server = summarizeServerMetrics([
    scrape(
      0,
      "sluice_paused_requests 0\nsluice_recomputed_tokens_total 10\nsluice_planner_solves_total 2\n" +
        "sluice_effective_tokens_total 5\nsluice_tokens_generated_total 7",
    ),
    scrape(
      250,
      "sluice_paused_requests 3\nsluice_recomputed_tokens_total 40\nsluice_planner_solves_total 5\n" +
        "sluice_effective_tokens_total 20.5\nsluice_tokens_generated_total 37",
    ),
    scrape(
      500,
      "sluice_paused_requests 1\nsluice_recomputed_tokens_total 58\nsluice_planner_solves_total 9\n" +
        "sluice_effective_tokens_total 35.25\nsluice_tokens_generated_total 57",
    ),
  ]);
  assertEquals(
    [server.peakPaused, server.recomputedTokens, server.plannerSolves, server.effectiveTokens],
    [3, 48, 7, 30.25],
  );
  const r = fakeResult("tf", [rec({ id: 0, arrivalsMs: [100, 200] })], { server });
  const table = resultsTable([r, fakeResult("big", [rec({ id: 0, arrivalsMs: [100] })])]);
  const row = (label: string) => table.split("\n").find((l) => l.startsWith(`| ${label} |`));
  assertEquals(row("paused requests, peak"), "| paused requests, peak | 3 | — |");
  assertEquals(row("recomputed tokens"), "| recomputed tokens | 48 | — |");
  assertEquals(row("planner solves"), "| planner solves | 7 | — |");
  assertEquals(
    row("effective tokens, server's count (of tokens generated)"),
    "| effective tokens, server's count (of tokens generated) | 30.3 (of 50) | — |",
  );
  assertEquals(
    row("unread buffer measured from"),
    "| unread buffer measured from | client arrivals (no server timing) | client arrivals (no server timing) |",
  );
});
