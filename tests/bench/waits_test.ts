// bench/matrix/waits.ts on hand-made timelines: first-token waits and stalls summed apart.

import { waitsOf } from "../../bench/matrix/waits.ts";
import { displayTimes } from "../../bench/serve/playout.ts";
import type { RequestRecord } from "../../bench/serve/record.ts";
import { assertEquals } from "../helpers/testing.ts";

function record(id: number, arrivalsMs: number[], readingRate: number): RequestRecord {
  return {
    id,
    outcome: arrivalsMs.length ? "ok" : "failed",
    sentAtMs: 0,
    endAtMs: arrivalsMs.at(-1) ?? 0,
    arrivalsMs,
    displayMs: displayTimes(arrivalsMs, readingRate),
    readingRate,
    sloTtftMs: 1000,
    sloTbtMs: 250,
    maxTokens: arrivalsMs.length,
  };
}

Deno.test("waits: TTFT and stall summed apart over the requests that got a token", () => {
  // Reader at 10 tokens/s (100 ms a token). Request 1: first token at 500 ms, the second due at
  // 600 ms arrives at 900 ms (300 ms stall), the third due at 1000 ms arrives at 950 ms (none).
  // Request 2: first at 2000 ms, then on time. Request 3 got nothing: no TTFT to add.
  const w = waitsOf([
    record(1, [500, 900, 950], 10),
    record(2, [2000, 2100], 10),
    record(3, [], 10),
  ]);
  assertEquals(w, { ttftS: 2.5, stallS: 0.3 });
});
