// The responsiveness bench's arithmetic on hand-made timelines: latency summaries, a stream's
// largest gap during a prefill window (including a stream that went silent), a paced stream's
// deviation from its cadence (multi-token chunks expected k intervals apart), its mean rate, and a
// stream's rate over a window; and the request body the bench sends.

import {
  arrivalsDuring,
  cadenceDeviations,
  largestGapDuring,
  meanRate,
  rateDuring,
  summarize,
} from "../../bench/responsiveness/stats.ts";
import { requestBody } from "../../bench/responsiveness/stream.ts";
import { assert, assertEquals } from "../helpers/testing.ts";

const near = (got: number | null, want: number, what: string) =>
  assert(got !== null && Math.abs(got - want) <= 1e-9, `${what}: got ${got}, want ${want}`);

Deno.test("summarize: count, p50, p99 and max; nulls for no data", () => {
  const s = summarize([4, 1, 3, 2, 100]);
  assertEquals(s.count, 5);
  near(s.p50, 3, "p50");
  near(s.p99, 96.16, "p99"); // 4 + 0.96 × (100 − 4), linear between closest ranks
  assertEquals(s.max, 100);
  assertEquals(summarize([]), { count: 0, p50: null, p99: null, max: null });
});

Deno.test("largestGapDuring: whole gaps that overlap the window", () => {
  const a = [0, 10, 20, 400, 410, 1000];
  // Window [15, 405]: gaps 10→20 (10), 20→400 (380), 400→410 (10) overlap it.
  assertEquals(largestGapDuring(a, 15, 405), 380);
  // The gap 410→1000 starts inside the window and counts whole, past its end.
  assertEquals(largestGapDuring(a, 15, 420), 590);
  // A window between two arrivals sees the gap that spans it.
  assertEquals(largestGapDuring(a, 100, 200), 380);
  assertEquals(arrivalsDuring(a, 15, 405), 2);
});

Deno.test("largestGapDuring: a stream silent to the window's end counts up to the end", () => {
  assertEquals(largestGapDuring([0, 10, 20], 15, 500), 480);
  assertEquals(largestGapDuring([600, 610], 100, 605), 500); // nothing before the window
  assertEquals(largestGapDuring([], 0, 10), null);
});

Deno.test("cadenceDeviations: |gap − k × interval| after the first chunk", () => {
  const chunks = [
    { atMs: 300, tokens: 1 }, // TTFT: skipped
    { atMs: 350, tokens: 1 }, // on time
    { atMs: 410, tokens: 1 }, // 10 ms late
    { atMs: 450, tokens: 1 }, // 10 ms early
    { atMs: 550, tokens: 2 }, // two tokens, 100 ms: on time
    { atMs: 560, tokens: 1 }, // a burst: 40 ms early
  ];
  assertEquals(cadenceDeviations(chunks, 50), [0, 10, 10, 0, 40]);
  assertEquals(cadenceDeviations(chunks.slice(0, 1), 50), []);
});

Deno.test("meanRate: tokens after the first chunk over the span", () => {
  const chunks = [{ atMs: 1000, tokens: 1 }, { atMs: 1050, tokens: 1 }, { atMs: 1200, tokens: 3 }];
  near(meanRate(chunks), 20, "rate"); // 4 tokens in 200 ms
  assertEquals(meanRate(chunks.slice(0, 1)), null);
  assertEquals(meanRate([{ atMs: 5, tokens: 1 }, { atMs: 5, tokens: 1 }]), null);
});

Deno.test("requestBody: reading_rate only when paced; ignore_eos and streaming always", () => {
  const paced = JSON.parse(
    requestBody({ model: "m", prompt: [1, 2], maxTokens: 8, readingRate: 20 }),
  );
  assertEquals(paced, {
    model: "m",
    prompt: [1, 2],
    max_tokens: 8,
    stream: true,
    temperature: 0,
    ignore_eos: true,
    reading_rate: 20,
  });
  const unpaced = JSON.parse(requestBody({ model: "m", prompt: [1], maxTokens: 8 }));
  assert(!("reading_rate" in unpaced));
});

Deno.test("rateDuring: tokens of chunks inside (from, to] per second", () => {
  const chunks = [
    { atMs: 100, tokens: 1 }, // at the window's start: not counted
    { atMs: 150, tokens: 2 },
    { atMs: 300, tokens: 1 },
    { atMs: 301, tokens: 5 }, // after the end
  ];
  near(rateDuring(chunks, 100, 300), 15, "rate"); // 3 tokens in 200 ms
  assertEquals(rateDuring(chunks, 300, 300), null);
});
