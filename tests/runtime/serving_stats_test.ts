// What the runtime tells the server about how well it serves, on a fake engine (no GPU): each
// token's generation time, the prefill rows it spends again on positions a request had computed
// before (recomputed tokens), and TokenFlow's effective tokens from each buffer's occupancy at
// every deposit.

import { FakeEngine, type FakeEngineShape } from "../../sim/fake_engine.ts";
import { effectiveTokens, tokenWeight } from "../../runtime/effective_tokens.ts";
import { Runtime, type TokenEvent } from "../../runtime/service.ts";
import { TokenPacer } from "../../runtime/request/token_buffer.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { greedy } from "../helpers/requests.ts";

function runtimeOver(engine: FakeEngine, preempt?: "recompute" | "swap" | "partial") {
  return new Runtime(engine, {
    policy: "fcfs",
    preempt,
    maxQueue: 100,
    maxTokensLimit: 10_000,
    eosIds: [],
  });
}

/** Lets the loop run (the fake engine answers in microtasks) until `done` holds, boundedly. */
async function settle(done: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 0));
}

Deno.test("effective tokens: TokenFlow's weights, exact", () => {
  // L = 20: full weight up to 2 buffered, 0.5 at 3, nothing from 4.
  assertEquals([0, 2, 3, 4, 30].map((b) => tokenWeight(b, 20)), [1, 1, 0.5, 0, 0]);
  assertEquals(tokenWeight(0, 0), 0);
  // L = 10: 1 at b = 1, 0 from b = 2.
  assertEquals(effectiveTokens([0, 0, 1, 2, 3, 4, 5, 6, 7, 8]), 3);
  // The output length can be more than the deposits counted (tokens that came after a cancel).
  assertEquals(effectiveTokens([0, 3], 20), 1.5);
});

Deno.test("the pacer records the occupancy each token found when it was deposited", async () => {
  let t = 0;
  const timers: (() => void)[] = [];
  const pacer = new TokenPacer<number>({
    rate: 10,
    clock: { now: () => t, setTimeout: (fn) => timers.push(fn), clearTimeout: () => {} },
  });
  const it = pacer[Symbol.asyncIterator]();
  const first = it.next(); // a reader waits before anything is there
  for (let i = 0; i < 5; i++) pacer.deposit(i); // a burst: the reader takes one, four wait
  assertEquals((await first).value, 0);
  assertEquals(pacer.occupancyAtDeposits(), [0, 0, 1, 2, 3]);
  t = 100; // the reader comes back when the next token is due: it takes one, three wait
  assertEquals((await it.next()).value, 1);
  pacer.deposit(5);
  assertEquals(pacer.occupancyAtDeposits(), [0, 0, 1, 2, 3, 3]);
  assertEquals(timers.length, 0);
});

Deno.test("token events carry their generation time: in order, after arrival, before release", async () => {
  const engine = new FakeEngine();
  const runtime = runtimeOver(engine);
  const before = performance.now();
  const handle = runtime.submit({ ids: [1, 2, 3], maxTokens: 12, sampling: greedy() });
  const got: { ev: TokenEvent; at: number }[] = [];
  for await (const ev of handle.tokens) got.push({ ev, at: performance.now() });
  assertEquals(got.length, 12);
  let last = before;
  for (const { ev, at } of got) {
    assert(ev.generatedAt >= last, `generatedAt ${ev.generatedAt} went back from ${last}`);
    assert(ev.generatedAt <= at, "a token is released only after it was generated");
    last = ev.generatedAt;
  }
  await runtime.close();
});

Deno.test("effective tokens: a reader far behind generation gets less than raw, exactly", async () => {
  const engine = new FakeEngine();
  const runtime = runtimeOver(engine);
  // 0.5 tokens/s: after the first token the reader takes nothing for 2 s, while the fake engine
  // generates all 20 in a few ms. Token j found j - 1 tokens waiting (j >= 1), token 0 none.
  const handle = runtime.submit({
    ids: [4, 5, 6],
    maxTokens: 20,
    sampling: greedy(),
    readingRate: 0.5,
  });
  const it = handle.tokens[Symbol.asyncIterator]();
  await it.next();
  await settle(() => runtime.stats().tokensGenerated === 20);
  assertEquals(runtime.stats().effectiveTokens, 0, "counted only at the request's end");
  handle.cancel(); // the reader leaves: the request ends with 19 tokens unread
  await handle.done;
  await settle(() => runtime.stats().effectiveTokens > 0);
  // Occupancies 0, 0, 1, 2, 3, ..., 18 with L = 20: weights 1, 1, 1, 1, 0.5, then 0.
  assertEquals(runtime.stats().effectiveTokens, 4.5);
  assertEquals(runtime.stats().tokensGenerated, 20);
  await runtime.close();
});

Deno.test("effective tokens: readers that keep up count every token", async () => {
  const engine = new FakeEngine({ maxSlots: 4 });
  const runtime = runtimeOver(engine);
  // Unpaced readers take each token as it comes; with 40+ tokens a stray token or four waiting
  // would still weigh 1.
  const handles = [0, 1, 2].map((i) =>
    runtime.submit({ ids: [7, 8, i], maxTokens: 40 + i, sampling: greedy(i) })
  );
  await Promise.all(handles.map(async (h) => {
    for await (const _ of h.tokens);
    await h.done;
  }));
  await settle(() => runtime.stats().effectiveTokens === 123);
  assertEquals(runtime.stats().effectiveTokens, 40 + 41 + 42);
  await runtime.close();
});

/**
 * Runs requests against a pool too small for all of them and checks recomputedTokens against an
 * invariant that does not look inside the scheduler: every row the engine ran is either a
 * position computed for the first time (a request of prompt P and N tokens has P + N - 1 of
 * them) or one computed again.
 */
async function recomputeCase(
  shape: FakeEngineShape,
  preempt: "recompute" | "swap" | "partial",
  requests: { prompt: number; maxTokens: number }[],
): Promise<{ preemptions: number; recomputed: number }> {
  const engine = new FakeEngine(shape);
  const runtime = runtimeOver(engine, preempt);
  const handles = requests.map((r, i) =>
    runtime.submit({
      ids: Array.from({ length: r.prompt }, (_, k) => (k * 13 + i) % 900 + 1),
      maxTokens: r.maxTokens,
      sampling: greedy(i),
    })
  );
  await Promise.all(handles.map(async (h) => {
    for await (const _ of h.tokens);
    assertEquals((await h.done).reason, "length");
  }));
  const s = runtime.stats();
  const rows = engine.rowsPerStep.reduce((a, b) => a + b, 0);
  const firstTime = requests.reduce((a, r) => a + r.prompt + r.maxTokens - 1, 0);
  assertEquals(s.recomputedTokens, rows - firstTime, `${preempt}: rows ${rows}`);
  await runtime.close();
  return { preemptions: s.preemptions, recomputed: s.recomputedTokens };
}

const CROWD = Array.from({ length: 6 }, (_, i) => ({ prompt: 5 + 3 * i, maxTokens: 12 + i }));

Deno.test("recomputed tokens: none when everything fits", async () => {
  const r = await recomputeCase({ blocksPerArena: [512] }, "recompute", CROWD);
  assertEquals(r, { preemptions: 0, recomputed: 0 });
});

for (const preempt of ["recompute", "partial", "swap"] as const) {
  Deno.test(`recomputed tokens: every prefill row of a position computed before (${preempt})`, async () => {
    // 2 layers of 4-token blocks: 10 blocks per layer hold 40 positions, far fewer than 6 need.
    const shape = { blocksPerArena: [20], hostBlocks: preempt === "swap" ? 256 : 0 };
    const r = await recomputeCase(shape, preempt, CROWD);
    assert(r.preemptions > 0, "the pool forces preemptions");
    // A request swapped out mid-prefill resumes where its host copy ends: nothing again.
    if (preempt !== "swap") assert(r.recomputed > 0, `${preempt}: nothing recomputed`);
  });
}
