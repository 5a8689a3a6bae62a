// Priorities with aging (runtime/policy/priority.ts): the wrapper's decisions on hand-made
// requests, then on the fake engine in fake time — a priority flip pauses a running request and
// wakes the loop, and with --preempt swap and swap reuse a request paused a second time moves only
// the KV it made since its last swap.

import { FakeEngine, toyGeneration } from "../../../sim/fake_engine.ts";
import { assert, assertEquals, assertThrows, useFakeTime } from "../../helpers/testing.ts";
import { stage, testRequest } from "../../helpers/requests.ts";
import { fcfsPolicy } from "../../../runtime/policy/fcfs.ts";
import type { PolicyContext, SchedulingPolicy } from "../../../runtime/policy/policy.ts";
import { withPriority } from "../../../runtime/policy/priority.ts";
import { Request } from "../../../runtime/request/request.ts";
import {
  InvalidRequest,
  type RequestHandle,
  Runtime,
  type RuntimeOptions,
} from "../../../runtime/service.ts";

const AGING_MS = 1000;

/** A request of `priority` with a 4-token prompt; `admitted` makes it a running one. */
function request(id: number, priority: number, admitted?: number): Request {
  const req = testRequest(id, { ids: [1, 2, 3, 4], maxTokens: 8, priority });
  return admitted === undefined ? req : stage(req, "decoding", { order: admitted });
}

/** A policy context on a settable clock with `room`: free slots and free blocks per layer. */
function context(room: { slots: number; blocks: number }, clock = { now: 0 }): PolicyContext {
  return {
    now: () => clock.now,
    maxSlots: 4,
    get freeSlots() {
      return room.slots;
    },
    maxRows: 16,
    blockSize: 4,
    get freeBlocksPerLayer() {
      return room.blocks;
    },
    hostTier: false,
    stepMs: () => null,
    copyMs: () => null,
  };
}

const ids = (reqs: readonly Request[]) => reqs.map((r) => r.id);

Deno.test("order: lower priority first, ties in the wrapped policy's order", () => {
  const policy = withPriority(fcfsPolicy);
  const waiting = [request(1, 2), request(2, 0), request(3, 2), request(4, -1), request(5, 0)];
  assertEquals(ids(policy.order!(waiting, context({ slots: 0, blocks: 0 }))), [4, 2, 5, 1, 3]);
  // A wrapped order is kept among equals.
  const reversed: SchedulingPolicy = { ...fcfsPolicy, order: (w) => [...w].reverse() };
  const wrapped = withPriority(reversed);
  assertEquals(ids(wrapped.order!(waiting, context({ slots: 0, blocks: 0 }))), [4, 5, 2, 3, 1]);
});

Deno.test("order: a request not ready yet ends the queue of a policy without an order of its own", () => {
  const policy = withPriority(fcfsPolicy);
  const waiting = [request(1, 0), request(2, 1), request(3, 2)];
  waiting[1].issueSample(); // a sample still on its way back
  assertEquals(ids(policy.order!(waiting, context({ slots: 1, blocks: 9 }))), [1]);
  const ordered = withPriority({ ...fcfsPolicy, order: (w) => [...w] });
  assertEquals(ids(ordered.order!(waiting, context({ slots: 1, blocks: 9 }))), [1, 2, 3]);
});

Deno.test("aging: one level per AGING_MS of waiting, never past the best priority present", () => {
  const clock = { now: 0 };
  const ctx = context({ slots: 0, blocks: 0 }, clock);
  const policy = withPriority(fcfsPolicy, { agingMs: AGING_MS });
  const low = request(1, 3);
  const best = request(2, 0, 0);
  policy.pauseBeforeStep!([best], [low], ctx); // low starts waiting at 0
  clock.now = 2.5 * AGING_MS;
  const fresh = request(3, 1);
  // low is at 3 - 2 = 1, level with fresh, and ahead of it in queue order.
  assertEquals(ids(policy.order!([low, fresh], ctx)), [1, 3]);
  assertEquals(ids(policy.order!([fresh, low], ctx)), [3, 1]);
  clock.now = 10 * AGING_MS;
  // Ten levels of waiting, yet no better than the best live priority (0): ties with a newcomer.
  const newcomer = request(4, 0);
  assertEquals(ids(policy.order!([newcomer, low], ctx)), [4, 1]);
  // With every priority equal, waiting changes nothing: the floor holds them level.
  const a = request(5, 7);
  const b = request(6, 7);
  const same = withPriority(fcfsPolicy, { agingMs: AGING_MS });
  same.pauseBeforeStep!([], [a], ctx);
  clock.now += 5 * AGING_MS;
  assertEquals(ids(same.order!([b, a], ctx)), [6, 5]);
});

Deno.test("pickVictim: the worst effective priority, ties to the wrapped policy (newest admitted)", () => {
  const policy = withPriority(fcfsPolicy);
  const running = [request(1, 5, 0), request(2, 0, 1), request(3, 5, 2), request(4, 1, 3)];
  // fcfs alone would take 4, the newest; among the worst (5) it takes the newer, 3.
  assertEquals(policy.pickVictim(running, running[1]).id, 3);
  assertEquals(fcfsPolicy.pickVictim(running, running[1]).id, 4);
  // A needy request of the worst priority preempts itself rather than a better one.
  const needy = request(5, 9, 4);
  assertEquals(policy.pickVictim([...running, needy], needy).id, 5);
});

Deno.test("pauseBeforeStep: a strictly better waiting request that does not fit pauses the worst", () => {
  const room = { slots: 0, blocks: 0 };
  const ctx = context(room);
  const policy = withPriority(fcfsPolicy);
  const running = [request(1, 2, 0), request(2, 4, 1), request(3, 4, 2), request(4, 0, 3)];
  const better = request(5, 1);
  assertEquals(ids(policy.pauseBeforeStep!(running, [better], ctx)), [3]);
  // Equal to the worst is not enough.
  assertEquals(policy.pauseBeforeStep!(running, [request(6, 4)], ctx), []);
  // Nobody pauses while it fits: a free slot and its 1 block per layer.
  room.slots = 1;
  room.blocks = 1;
  assertEquals(policy.pauseBeforeStep!(running, [better], ctx), []);
  // A slot but too few blocks: pause.
  room.blocks = 0;
  assertEquals(ids(policy.pauseBeforeStep!(running, [better], ctx)), [3]);
  // Not ready (its last sample is still coming back): wait for it rather than pause for nothing.
  better.issueSample();
  assertEquals(policy.pauseBeforeStep!(running, [better], ctx), []);
});

Deno.test("pauseBeforeStep: a request that has waited its way up is not paused by the next arrival", () => {
  const clock = { now: 0 };
  const ctx = context({ slots: 0, blocks: 0 }, clock);
  const policy = withPriority(fcfsPolicy, { agingMs: AGING_MS });
  const high = request(1, 0, 0);
  const low = request(2, 3);
  policy.pauseBeforeStep!([high], [low], ctx);
  clock.now = 3 * AGING_MS; // low has aged level with high
  assertEquals(policy.pauseBeforeStep!([high], [low], ctx), []);
  high.end("length");
  stage(low, "decoding", { order: 1 });
  const next = request(3, 0);
  clock.now += 10;
  assertEquals(policy.pauseBeforeStep!([low], [next], ctx), []);
  // Without aging it would have been paused at once.
  const strict = withPriority(fcfsPolicy, { agingMs: Infinity });
  assertEquals(ids(strict.pauseBeforeStep!([low], [next], ctx)), [2]);
});

// ---- on the fake engine, in fake time ----

const STEP_MS = 10;

function runtimeOver(engine: FakeEngine, options: Partial<RuntimeOptions> = {}): Runtime {
  return new Runtime(engine, {
    policy: "fcfs",
    maxQueue: 100,
    maxTokensLimit: 10_000,
    eosIds: [],
    ...options,
  });
}

/** One step in flight, each STEP_MS of fake time. */
function steppedEngine(shape: ConstructorParameters<typeof FakeEngine>[0] = {}): FakeEngine {
  return new FakeEngine(
    { maxSlots: 1, ringSize: 1, maxRows: 16, ...shape },
    () => new Promise((r) => setTimeout(r, STEP_MS)),
  );
}

/** Submits and reads a request; resolves to its tokens. */
function run(
  rt: Runtime,
  prompt: number[],
  maxTokens: number,
  priority?: number,
): { handle: RequestHandle; tokens: Promise<number[]> } {
  const handle = rt.submit({
    ids: prompt,
    maxTokens,
    sampling: { temperature: 0, topK: 0, topP: 1, seed: prompt[0] },
    priority,
  });
  const tokens = (async () => {
    const got: number[] = [];
    for await (const ev of handle.tokens) got.push(ev.id);
    return got;
  })();
  return { handle, tokens };
}

const stateOf = (rt: Runtime, h: RequestHandle) =>
  rt.stats().requests.find((r) => r.id === h.id)?.state;
const generatedBy = (rt: Runtime, h: RequestHandle) =>
  rt.stats().requests.find((r) => r.id === h.id)?.generated ?? 0;

async function until(clock: ReturnType<typeof useFakeTime>, done: () => boolean): Promise<void> {
  for (let i = 0; i < 10_000 && !done(); i++) await clock.tickAsync(STEP_MS);
  assert(done(), "timed out");
}

Deno.test("runtime: the waiting request of the best priority runs first; a flip pauses a running one", async () => {
  const clock = useFakeTime(0);
  try {
    const engine = steppedEngine();
    const rt = runtimeOver(engine);
    const first = run(rt, [1, 2, 3], 20);
    await until(clock, () => generatedBy(rt, first.handle) >= 2);
    const low = run(rt, [4, 5, 6], 5, 3);
    const high = run(rt, [7, 8, 9], 5, -2);
    // first (priority 0) runs: high (-2) is better, and there is one slot: first is paused.
    await clock.tickAsync(2 * STEP_MS);
    assertEquals(stateOf(rt, first.handle), "paused");
    assert(["prefilling", "decoding"].includes(stateOf(rt, high.handle)!));
    await until(clock, () => stateOf(rt, high.handle) === undefined);
    // Then first (0) before low (3).
    await clock.tickAsync(3 * STEP_MS);
    assert(["prefilling", "decoding"].includes(stateOf(rt, first.handle)!));
    assertEquals(stateOf(rt, low.handle), "waiting");
    // A flip while it runs: first goes to 5, worse than low's 3, and steps out for it.
    assert(first.handle.setPriority(5));
    await clock.tickAsync(3 * STEP_MS);
    assertEquals(stateOf(rt, first.handle), "paused");
    assert(["prefilling", "decoding"].includes(stateOf(rt, low.handle)!));
    await until(clock, () => rt.openRequests === 0);
    for (
      const [r, prompt, n] of [[first, [1, 2, 3], 20], [low, [4, 5, 6], 5], [
        high,
        [7, 8, 9],
        5,
      ]] as const
    ) {
      assertEquals(await r.tokens, toyGeneration(prompt, n, prompt[0], engine.info.vocabSize));
    }
    // Finished: a change is refused; a bad value throws.
    assertEquals(first.handle.setPriority(0), false);
    assertThrows(() => low.handle.setPriority(1.5), InvalidRequest);
    assertThrows(() => low.handle.setPriority(101), InvalidRequest);
    assertThrows(
      () =>
        rt.submit({
          ids: [1],
          sampling: { temperature: 0, topK: 0, topP: 1, seed: 0 },
          priority: -101,
        }),
      InvalidRequest,
    );
    await rt.close();
  } finally {
    clock.uninstall();
  }
});

Deno.test("runtime: a flip lets a waiting request take the blocks a running one holds", async () => {
  const clock = useFakeTime(0);
  try {
    // Two slots but room for one request's blocks: fcfs alone would let b wait for a to finish.
    const engine = steppedEngine({ maxSlots: 2, blocksPerArena: [8], numLayers: 2, blockSize: 4 });
    const rt = runtimeOver(engine);
    const a = run(rt, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], 3, 0);
    const b = run(rt, [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14], 3, 0);
    await clock.tickAsync(STEP_MS);
    assertEquals(stateOf(rt, b.handle), "waiting");
    b.handle.setPriority(-1);
    await clock.tickAsync(2 * STEP_MS);
    assertEquals(stateOf(rt, a.handle), "paused");
    await until(clock, () => rt.openRequests === 0);
    assertEquals((await b.tokens).length, 3);
    assertEquals((await a.tokens).length, 3);
    await rt.close();
  } finally {
    clock.uninstall();
  }
});

Deno.test("runtime: --priority off ignores priorities", async () => {
  const clock = useFakeTime(0);
  try {
    const rt = runtimeOver(steppedEngine(), { priority: false });
    const first = run(rt, [1, 2, 3], 6, 50);
    const second = run(rt, [4, 5, 6], 6, 9);
    const third = run(rt, [7, 8, 9], 6, -50);
    const order: number[] = [];
    for (const r of [first, second, third]) r.handle.done.then(() => order.push(r.handle.id));
    await until(clock, () => rt.openRequests === 0);
    await clock.tickAsync(STEP_MS);
    assertEquals(order, [first.handle.id, second.handle.id, third.handle.id]);
    assertEquals(rt.stats().preemptions, 0);
    await rt.close();
  } finally {
    clock.uninstall();
  }
});

/**
 * FastSwitch's claim: a priority flip costs only the KV made since the last swap. One slot, a host
 * tier, --preempt swap: `a` runs, is flipped out for `b` (swap out: all its blocks), comes back
 * (swap in: its host copy stays valid), makes `more` tokens, and is flipped out again.
 */
async function flipTwice(swapReuse: boolean, more: number) {
  const clock = useFakeTime(0);
  try {
    const numLayers = 2;
    const engine = steppedEngine({
      numLayers,
      blockSize: 4,
      blocksPerArena: [64],
      hostBlocks: 128,
      maxSlots: 1,
    });
    const rt = runtimeOver(engine, { preempt: "swap", swapReuse });
    const a = run(rt, Array.from({ length: 24 }, (_, i) => i + 1), 60);
    await until(clock, () => generatedBy(rt, a.handle) >= 10);
    const b = run(rt, [9, 9, 9], 40, 0);
    assert(a.handle.setPriority(1)); // worse than b: a steps out
    await until(clock, () => stateOf(rt, a.handle) === "paused");
    const first = { ...rt.stats().swaps! };
    assertEquals(first.swapsOut, 1);
    await until(clock, () => generatedBy(rt, b.handle) >= 2);
    assert(b.handle.setPriority(2)); // now b is the worse: a comes back
    await until(clock, () => stateOf(rt, a.handle) === "decoding");
    const resumedAt = generatedBy(rt, a.handle);
    await until(clock, () => generatedBy(rt, a.handle) >= resumedAt + more);
    assert(a.handle.setPriority(3)); // and out again
    await until(clock, () => stateOf(rt, a.handle) === "paused");
    const s = rt.stats().swaps!;
    b.handle.cancel();
    await until(clock, () => rt.openRequests === 0);
    const want = toyGeneration(
      Array.from({ length: 24 }, (_, i) => i + 1),
      60,
      1,
      engine.info.vocabSize,
    );
    assertEquals(await a.tokens, want);
    assertEquals(rt.stats().hostBlocksUsed, 0);
    assertEquals(rt.stats().kvBlocksUsed, 0);
    await rt.close();
    return { firstOut: first.blocksOut, secondOut: s.repeatBlocksOut, swaps: s, numLayers };
  } finally {
    clock.uninstall();
  }
}

Deno.test("flip cost: with swap reuse, the second flip moves only the blocks made since the first", async () => {
  const more = 8; // tokens made between the two flips: 2 blocks of 4, plus the partial one
  const reuse = await flipTwice(true, more);
  const { firstOut, secondOut, swaps, numLayers } = reuse;
  assertEquals(swaps.swapsOut, 3, "a out, b out, a out again");
  assertEquals(swaps.repeatSwapsOut, 1);
  assert(swaps.swapsIn >= 1, "a came back by swapping in its host copy");
  // The first flip moved all of a's blocks (24 prompt + ~10 generated positions: 9 per layer).
  assert(firstOut >= 8 * numLayers, `first flip moved ${firstOut} blocks`);
  // The second: the `more` new positions' blocks, and the partial block it had then, rewritten.
  assert(
    secondOut >= (more / 4) * numLayers && secondOut <= (more / 4 + 1) * numLayers,
    `second flip moved ${secondOut} blocks (first ${firstOut})`,
  );
  // Without reuse the same flips copy everything again.
  const copyAll = await flipTwice(false, more);
  assertEquals(copyAll.firstOut, firstOut);
  assertEquals(copyAll.secondOut, firstOut + (more / 4) * numLayers);
});

/**
 * FastSwitch's churn (§4.4): at a priority update, when memory is short, the running request that
 * is now of the worst priority is swapped out for a better waiting one. Three requests of priority
 * 1 run and fill the pool; a fourth of priority 1 waits. `drop` lowers the oldest, `a`, to 2: it,
 * not the newest running one (the victim by queue order), steps out, by swap, for the waiting one.
 * Without the drop the waiting one is raised to 0 instead, and the newest, `c`, steps out.
 */
async function churnVictim(drop: boolean) {
  const clock = useFakeTime(0);
  try {
    const engine = steppedEngine({
      numLayers: 2,
      blockSize: 4,
      blocksPerArena: [56], // 28 a layer: three requests of 24 + 12 positions (9 blocks each)
      hostBlocks: 128,
      maxSlots: 4,
      maxRows: 128, // all three prefill in one step, and decode in step with each other
    });
    const rt = runtimeOver(engine, { preempt: "swap", swapReuse: true });
    const prompt = (first: number) => Array.from({ length: 24 }, (_, i) => first + i);
    const [a, b, c] = [1, 2, 3].map((first) => run(rt, prompt(first), 12, 1));
    // 8 tokens each: 32 positions, 8 blocks a layer each, 4 left: too few for another 24.
    await until(clock, () => [a, b, c].every((r) => generatedBy(rt, r.handle) >= 8));
    const d = run(rt, prompt(4), 12, 1);
    await clock.tickAsync(2 * STEP_MS);
    assertEquals(stateOf(rt, d.handle), "waiting", "d does not fit and is no better");
    assertEquals(rt.stats().preemptions, 0);
    if (drop) assert(a.handle.setPriority(2));
    else assert(d.handle.setPriority(0));
    await until(clock, () => rt.stats().preemptions > 0);
    const paused = [a, b, c].filter((r) => stateOf(rt, r.handle) === "paused");
    const swaps = { ...rt.stats().swaps! };
    await until(clock, () => rt.openRequests === 0);
    for (const [r, first] of [[a, 1], [b, 2], [c, 3], [d, 4]] as const) {
      assertEquals(await r.tokens, toyGeneration(prompt(first), 12, first, engine.info.vocabSize));
    }
    assertEquals(rt.stats().kvBlocksUsed, 0);
    assertEquals(rt.stats().hostBlocksUsed, 0);
    await rt.close();
    return { paused: paused.map((r) => r.handle.id), swapsOut: swaps.swapsOut, a, c };
  } finally {
    clock.uninstall();
  }
}

Deno.test("churn: the running request whose priority drops is the one swapped out", async () => {
  const dropped = await churnVictim(true);
  assertEquals(dropped.paused, [dropped.a.handle.id]);
  assertEquals(dropped.swapsOut, 1);
  // The control: the same pressure without the drop takes the newest.
  const raised = await churnVictim(false);
  assertEquals(raised.paused, [raised.c.handle.id]);
  assertEquals(raised.swapsOut, 1);
});
