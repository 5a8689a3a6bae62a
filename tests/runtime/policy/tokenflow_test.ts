// TokenFlow's buffer-aware scheduling on the fake engine, in fake time. The first test is the
// paper's Figure 6 example: two batch slots, a step every 25 ms (40 tokens/s per running request),
// readers at 20, 30 and 25 tokens/s.

import { PROFILE_WEIGHT, sumsOf } from "../../../engine/kv/cost_model.ts";
import { FakeEngine, toyGeneration } from "../../../sim/fake_engine.ts";
import { rng } from "../../helpers/random.ts";
import { assert, assertEquals, useFakeTime } from "../../helpers/testing.ts";
import { type Scene, stage, testRequest } from "../../helpers/requests.ts";
import { Refused, type RequestHandle, Runtime } from "../../../runtime/service.ts";
import type { PolicyName } from "../../../runtime/policy/index.ts";
import type { PolicyContext } from "../../../runtime/policy/policy.ts";
import { tokenflowPolicy } from "../../../runtime/policy/tokenflow.ts";
import { Request } from "../../../runtime/request/request.ts";

const STEP_MS = 25;

function figure6Runtime(policy: PolicyName) {
  // One step in flight at a time, so each step takes exactly STEP_MS of fake time.
  const engine = new FakeEngine(
    { maxSlots: 2, ringSize: 1, maxRows: 64, blocksPerArena: [512], maxBlocksPerSeq: 128 },
    () => new Promise((r) => setTimeout(r, STEP_MS)),
  );
  return new Runtime(engine, { policy, maxQueue: 10, maxTokensLimit: 10_000, eosIds: [] });
}

function submit(rt: Runtime, id: number, rate: number, maxTokens = 300): RequestHandle {
  const h = rt.submit({
    ids: [id, id + 1, id + 2],
    maxTokens,
    sampling: { temperature: 0, topP: 1, topK: 0, seed: id },
    readingRate: rate,
  });
  // A reader at its rate: the pacer releases tokens on (fake) timers.
  (async () => {
    for await (const _ of h.tokens) { /* read */ }
  })();
  return h;
}

/** Each request's state every 100 ms of fake time until `untilMs`. */
async function timeline(
  rt: Runtime,
  clock: ReturnType<typeof useFakeTime>,
  untilMs: number,
  onTick: (t: number) => void,
): Promise<Map<number, string>[]> {
  const states: Map<number, string>[] = [];
  for (let t = 0; t <= untilMs; t += 100) {
    onTick(t);
    await clock.tickAsync(100);
    states.push(new Map(rt.stats().requests.map((r) => [r.id, r.state])));
  }
  return states;
}

const running = (s: string | undefined) => s === "decoding" || s === "prefilling";

Deno.test("tokenflow: Figure 6 — R3 waits, then R1 steps out on its buffer, then R2 gives way to R1; nobody stalls", async () => {
  const clock = useFakeTime(0);
  try {
    const rt = figure6Runtime("tokenflow");
    const handles: RequestHandle[] = [];
    const states = await timeline(rt, clock, 6000, (t) => {
      if (t === 0) handles.push(submit(rt, 1, 20), submit(rt, 2, 30));
      if (t === 2000) handles.push(submit(rt, 3, 25));
    });
    const [r1, r2, r3] = handles.map((h) => h.id);
    const at = (ms: number) => states[Math.round(ms / 100)];
    // t = 2 s: neither running request has banked enough playout to step out: R3 waits.
    assert(running(at(2000).get(r1)) && running(at(2000).get(r2)));
    assertEquals(at(2000).get(r3), "waiting");
    // By t = 3 s, R1 (the slower reader, so the larger buffer) is paused and R3 runs.
    assertEquals(at(3000).get(r1), "paused");
    assert(running(at(3000).get(r2)) && running(at(3000).get(r3)));
    // Later R1 runs again, in place of R2, which had the most playout then.
    const back = states.findIndex((s, i) => i > 30 && running(s.get(r1)));
    assert(back > 30 && back <= 60, `R1 resumed at ${back * 100} ms`);
    assertEquals(states[back].get(r2), "paused");
    assert(running(states[back].get(r3)));
    // Nobody's reader waited on an empty buffer after its first token.
    for (const h of handles) assertEquals(h.bufferStats().stallMs, 0, `request ${h.id} stalled`);
    for (const h of handles) h.cancel();
    await clock.tickAsync(1000);
    await rt.close();
  } finally {
    clock.uninstall();
  }
});

Deno.test("tokenflow: fcfs on the same arrivals keeps R3 waiting until a request finishes", async () => {
  const clock = useFakeTime(0);
  try {
    const rt = figure6Runtime("fcfs");
    const handles: RequestHandle[] = [];
    const states = await timeline(rt, clock, 6000, (t) => {
      if (t === 0) handles.push(submit(rt, 1, 20), submit(rt, 2, 30));
      if (t === 2000) handles.push(submit(rt, 3, 25));
    });
    assert(states.slice(20).every((s) => s.get(handles[2].id) === "waiting"));
    for (const h of handles) h.cancel();
    await clock.tickAsync(1000);
    await rt.close();
  } finally {
    clock.uninstall();
  }
});

// Random paced workloads in fake time: arrivals over a few seconds, readers at 3–25 tokens/s, a
// small pool and few slots, sometimes a host tier to swap to, some readers hanging up. TokenFlow pauses and
// resumes requests as their buffers fill and drain; every request must still get exactly the
// tokens its prompt alone determines, end, and leave no block behind on either tier.
Deno.test("tokenflow property: 300 random paced workloads lose, duplicate and reorder no token, starve nobody and leak no block", async () => {
  const next = rng(4242);
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const clock = useFakeTime(0);
  let pauses = 0, swapsIn = 0;
  try {
    for (let scenario = 0; scenario < 300; scenario++) {
      const blockSize = int(2, 4);
      const perLayer = int(16, 48);
      const hostBlocks = next() < 0.5 ? 0 : int(perLayer, 4 * perLayer);
      const shape = {
        numLayers: 2,
        blockSize,
        blocksPerArena: [2 * perLayer],
        maxBlocksPerSeq: perLayer,
        maxSlots: int(1, 3),
        maxRows: int(4, 16),
        ringSize: int(1, 2),
        vocabSize: 50,
        hostBlocks,
      };
      const stepMs = int(5, 20);
      const engine = new FakeEngine(shape, () => new Promise((r) => setTimeout(r, stepMs)));
      const rt = new Runtime(engine, {
        policy: "tokenflow",
        preempt: hostBlocks > 0 ? "swap" : "recompute",
        writeThrough: hostBlocks > 0 && next() < 0.5,
        maxQueue: 100,
        maxTokensLimit: 10_000,
        eosIds: [],
      });
      const context = perLayer * blockSize;
      const runs: Promise<void>[] = [];
      const n = int(1, 8);
      for (let i = 0; i < n; i++) {
        await clock.tickAsync(int(0, 800));
        const prompt = Array.from({ length: int(1, Math.floor(context / 2)) }, () => int(0, 49));
        const maxTokens = int(1, Math.min(120, context - prompt.length));
        const seed = int(0, 1000);
        const cancelAfter = next() < 0.15 ? int(1, 10) : undefined;
        const ctrl = new AbortController();
        const h = rt.submit({
          ids: prompt,
          maxTokens,
          sampling: { temperature: 0, topP: 1, topK: 0, seed },
          readingRate: int(3, 25),
          stopIds: [],
          signal: ctrl.signal,
        });
        runs.push((async () => {
          const got: number[] = [];
          for await (const ev of h.tokens) {
            got.push(ev.id);
            if (got.length === cancelAfter) ctrl.abort();
          }
          const want = toyGeneration(prompt, maxTokens, seed, 50);
          const finish = await h.done;
          if (!ctrl.signal.aborted) assertEquals(finish.reason, "length");
          // A reader that hung up after generation had ended still reads "length": its stream is cut.
          if (ctrl.signal.aborted) {
            assertEquals(got, want.slice(0, got.length), `scenario ${scenario}: cancelled prefix`);
          } else {
            assertEquals(got, want, `scenario ${scenario}: request ${h.id}: ${got} vs ${want}`);
          }
        })());
      }
      // Every stream ends within a generous bound of fake time: nobody starves.
      let ended = false;
      const all = Promise.all(runs).finally(() => ended = true);
      all.catch(() => {}); // awaited below
      for (let t = 0; t < 600 && !ended; t++) await clock.tickAsync(100);
      assert(ended, `scenario ${scenario}: a stream did not end in 60 s of fake time`);
      await all;
      const st = rt.stats();
      assertEquals(st.kvBlocksUsed, 0, `scenario ${scenario}: device blocks left`);
      assertEquals(st.hostBlocksUsed, 0, `scenario ${scenario}: host blocks left`);
      pauses += st.policyPauses;
      swapsIn += st.swaps?.swapsIn ?? 0;
      await rt.close();
    }
  } finally {
    clock.uninstall();
  }
  // The policy must actually have paused and swapped requests back, or this proves nothing.
  assert(pauses > 100, `only ${pauses} pauses`);
  assert(swapsIn > 30, `only ${swapsIn} swap-ins`);
});

/**
 * A cost model whose step takes `fixedMs + perRowMs × rows` (one layer, no sampling cost), fitted
 * to two profiled points as the engine's is: re-fitting it from steps that take that long keeps
 * the line (with no points, the first observed step would make it flat).
 */
function linearCosts(fixedMs: number, perRowMs: number) {
  const line = { fixedMs: 0, perUnitMs: 0 };
  const points = [1, 64].map((rows) => [rows, fixedMs + perRowMs * rows] as [number, number]);
  return {
    numLayers: 1,
    roundTripMs: 0,
    layer: { fixedMs, perUnitMs: perRowMs },
    sample: line,
    hostToDevice: line,
    deviceToHost: line,
    overlap: 0,
    layerFit: sumsOf(points, PROFILE_WEIGHT),
  };
}

Deno.test("tokenflow --tokenflow-keep-up on: no more run at once than keep up with their fastest reader", async () => {
  const clock = useFakeTime(0);
  try {
    // 10 + 40 ms per row: 11 tokens/s each at 2 rows, 7.7 at 3 — below a 10 tokens/s reader.
    // The steps take that long, so re-fitting the model from them keeps it.
    const engine: FakeEngine = new FakeEngine(
      {
        maxSlots: 4,
        ringSize: 1,
        maxRows: 64,
        blocksPerArena: [512],
        maxBlocksPerSeq: 128,
        costModel: linearCosts(10, 40),
      },
      () => new Promise((r) => setTimeout(r, 10 + 40 * engine.rowsPerStep.at(-1)!)),
    );
    const rt = new Runtime(engine, {
      policy: "tokenflow",
      tokenflowKeepUp: true,
      maxQueue: 10,
      maxTokensLimit: 10_000,
      eosIds: [],
    });
    const handles = [1, 2, 3, 4].map((id) => submit(rt, id, 10));
    let most = 0;
    for (let t = 0; t < 50; t++) {
      await clock.tickAsync(100);
      most = Math.max(most, rt.stats().running);
    }
    assertEquals(most, 2);
    for (const h of handles) h.cancel();
    await clock.tickAsync(1000);
    await rt.close();
  } finally {
    clock.uninstall();
  }
});

/** A three-token request in `state` whose reader reads `rate` tokens/s, for the policy alone. */
function policyRequest(id: number, rate: number, state: Scene): Request {
  return stage(testRequest(id, { ids: [1, 2, 3], maxTokens: 10, readingRate: rate }), state);
}

/** Two slots' worth of readers on an adapter making 40 tokens/s at a full batch of two. */
const TWO_SLOTS: PolicyContext = {
  now: () => 0,
  maxSlots: 2,
  freeSlots: 1,
  maxRows: 16,
  blockSize: 4,
  freeBlocksPerLayer: 100,
  hostTier: false,
  stepMs: (rows) => 25 * rows,
  copyMs: () => 0,
};

Deno.test("tokenflow --tokenflow-overload hold: when the working set reads faster than a full batch makes, no new request joins", () => {
  const policy = tokenflowPolicy({ overload: "hold", keepUp: true });
  const req = policyRequest;
  // Two slots; a full batch of two takes 50 ms a step: 40 tokens/s in all.
  const ctx = TWO_SLOTS;
  const running = [req(1, 15, "decoding")];
  const paused = req(2, 15, "paused");
  const fresh = req(3, 5, "waiting");
  // 15 + 5 = 20 ≤ 40: the new request may join.
  assert(policy.mayAdmit!(fresh, running, ctx));
  // With more readers running, 15 + 30 + 5 > 40: it waits, while a paused one may still resume.
  const busy = [req(1, 15, "decoding"), req(4, 30, "decoding")];
  assertEquals(policy.mayAdmit!(fresh, busy, ctx), false);
  assert(policy.mayAdmit!(paused, [req(1, 15, "decoding")], ctx));
  // And nobody is paused for anyone while overloaded.
  assertEquals(policy.pauseBeforeStep!(busy, [fresh], { ...ctx, freeSlots: 0 }), []);
});

Deno.test("tokenflow: a reader no batch keeps up with, not even one alone, asks nothing of the batch", () => {
  // The rule matters where a rate can keep requests out: with both guards on.
  const policy = tokenflowPolicy({ overload: "hold", keepUp: true });
  const req = policyRequest;
  // A step of n rows takes 10 + 2n ms: 83 tokens/s alone, 50 each at five.
  const ctx: PolicyContext = {
    now: () => 0,
    maxSlots: 8,
    freeSlots: 4,
    maxRows: 16,
    blockSize: 4,
    freeBlocksPerLayer: 100,
    hostTier: false,
    stepMs: (rows) => 10 + 2 * rows,
    copyMs: () => 0,
  };
  const four = [1, 2, 3, 4].map((id) => req(id, 0, "decoding"));
  const fresh = req(9, 0, "waiting");
  // Faster than 83: served as fast as can be, like an unpaced reader, running or arriving.
  for (const rate of [1000, 10_000]) {
    assert(policy.mayAdmit!(fresh, [req(5, rate, "decoding")], ctx));
    assert(policy.mayAdmit!(req(5, rate, "waiting"), four, ctx));
  }
  // A reader the adapter can keep up with alone still keeps the batch small enough for it.
  assertEquals(policy.mayAdmit!(fresh, [req(5, 80, "decoding")], ctx), false);
  assertEquals(policy.mayAdmit!(req(5, 80, "waiting"), four, ctx), false);
  // Nor is it held back or paused for its (tiny) buffer.
  const greedy = req(5, 10_000, "decoding");
  greedy.buffer.occupancy = () => ({ tokens: 50_000, seconds: 5 });
  assertEquals(policy.holdBack!([greedy], ctx, []).size, 0);
  assertEquals(policy.pauseBeforeStep!([greedy], [fresh], { ...ctx, freeSlots: 0 }), []);
});

Deno.test("tokenflow: a reader far behind its stream holds it back just in time, and never stalls", async () => {
  for (const policy of ["tokenflow", "fcfs"] as const) {
    const clock = useFakeTime(0);
    try {
      const rt = figure6Runtime(policy);
      const h = submit(rt, 1, 10); // 40 tokens/s made, 10 read
      let most = 0;
      for (let t = 0; t < 60; t++) {
        await clock.tickAsync(100);
        most = Math.max(most, rt.stats().requests[0]?.buffered.seconds ?? 0);
      }
      if (policy === "tokenflow") {
        // The horizon with no cost model: μ·Δt + 3Δt = 2.5 s, plus a step's token.
        assert(most <= 2.7, `buffer reached ${most} s`);
        assertEquals(h.bufferStats().stallMs, 0);
      } else assert(most > 10, `fcfs runs ahead: ${most} s`);
      h.cancel();
      await clock.tickAsync(1000);
      await rt.close();
    } finally {
      clock.uninstall();
    }
  }
});

Deno.test("tokenflow: a pause is made only for a request admitted in its place that step, one rotation a step", () => {
  // The last case needs a gate that refuses: --tokenflow-keep-up on.
  const policy = tokenflowPolicy({ keepUp: true });
  const req = (id: number, rate: number, state: Scene, bufferedS: number) => {
    const r = policyRequest(id, rate, state);
    r.buffer.occupancy = () => ({ tokens: Math.round(bufferedS * rate), seconds: bufferedS });
    return r;
  };
  // Full: no slot and no block free; each request needs one block. A step of n rows takes
  // 50 + 20n ms, so three at once make 9.1 tokens/s each.
  const ctx: PolicyContext = {
    now: () => 0,
    maxSlots: 10,
    freeSlots: 0,
    maxRows: 16,
    blockSize: 4,
    freeBlocksPerLayer: 0,
    hostTier: false,
    stepMs: (rows) => 50 + 20 * rows,
    copyMs: () => 0,
  };
  const a = req(1, 2, "decoding", 10), b = req(2, 2, "decoding", 9), c = req(3, 2, "decoding", 0.1);
  const due1 = req(4, 2, "paused", 0.5), due2 = req(5, 2, "paused", 0.6);
  // Two due requests, two requests with playout to spare: only the most urgent is rotated in now
  // (its victim's move-out is this step's; the second waits for the next step).
  assertEquals(policy.pauseBeforeStep!([a, b, c], [due1, due2], ctx), [a]);
  // The most urgent one is not ready (a token of its still in flight): the next one gets the room.
  due1.issueSample();
  assertEquals(policy.pauseBeforeStep!([a, b, c], [due1, due2], ctx), [a]);
  due1.accept({ id: 4, logprob: 0, top: [] }); // its token is back
  // The gate would refuse it beside a 10 tokens/s reader (three at once make 9.1 each): pausing
  // `a` would free room for nobody, so nobody is paused.
  const fast = req(3, 10, "decoding", 0.1);
  assertEquals(policy.pauseBeforeStep!([a, b, fast], [due1, due2], ctx), []);
});

// Greedy readers (issue 17): a declared rate no batch can keep up with, not even a batch of one,
// must not keep others out. The adapter here makes 1000 / (10 + 2) = 83 tokens/s for one request.

/** A tokenflow runtime whose steps take 10 + 2 ms per row of fake time, as its cost model says. */
function linearRuntime(maxSlots: number, maxQueue: number) {
  const engine: FakeEngine = new FakeEngine(
    {
      maxSlots,
      ringSize: 1,
      maxRows: 64,
      blocksPerArena: [4096],
      maxBlocksPerSeq: 128,
      costModel: linearCosts(10, 2),
    },
    () => new Promise((r) => setTimeout(r, 10 + 2 * engine.rowsPerStep.at(-1)!)),
  );
  return new Runtime(engine, { policy: "tokenflow", maxQueue, maxTokensLimit: 10_000, eosIds: [] });
}

/** Ids of the requests still waiting for admission. */
const waitingIds = (rt: Runtime) =>
  rt.stats().requests.filter((r) => r.state === "waiting").map((r) => r.id);

for (const rate of [1000, 10_000]) {
  Deno.test(`tokenflow: four short requests join a stream read at ${rate} tokens/s within two steps, and end long before it`, async () => {
    const clock = useFakeTime(0);
    try {
      const rt = linearRuntime(8, 10);
      const long = submit(rt, 1, rate, 200);
      await clock.tickAsync(200); // it decodes alone
      const short = [10, 20, 30, 40].map((id) => submit(rt, id, 0, 4));
      // Two steps of five requests: 2 × (10 + 2 × 5) ms.
      await clock.tickAsync(40);
      assertEquals(waitingIds(rt), []);
      let ended = 0;
      for (const h of short) h.done.then(() => ended++);
      await clock.tickAsync(200);
      assertEquals(ended, 4);
      assert(rt.stats().requests.some((r) => r.id === long.id && running(r.state)));
      long.cancel();
      await clock.tickAsync(1000);
      await rt.close();
    } finally {
      clock.uninstall();
    }
  });

  Deno.test(`tokenflow: a stream read at ${rate} tokens/s joins four running ones within two steps`, async () => {
    const clock = useFakeTime(0);
    try {
      const rt = linearRuntime(8, 10);
      const others = [10, 20, 30, 40].map((id) => submit(rt, id, 0, 200));
      await clock.tickAsync(200);
      const greedy = submit(rt, 1, rate, 200);
      await clock.tickAsync(40);
      assertEquals(waitingIds(rt), []);
      assertEquals(rt.stats().running, 5);
      for (const h of [...others, greedy]) h.cancel();
      await clock.tickAsync(1000);
      await rt.close();
    } finally {
      clock.uninstall();
    }
  });
}

Deno.test("tokenflow: a burst of 64 requests read at 10000 tokens/s with max queue 4 fills all 32 slots; only those past the queue are refused", async () => {
  const clock = useFakeTime(0);
  try {
    const rt = linearRuntime(32, 4);
    const handles: RequestHandle[] = [];
    let refused = 0;
    for (let i = 0; i < 64; i++) {
      try {
        handles.push(submit(rt, 10 * i, 10_000, 8));
      } catch (err) {
        assert(err instanceof Refused && err.code === "queue_full");
        refused++;
      }
    }
    const s = rt.stats();
    assertEquals([s.running, s.waiting, refused], [32, 4, 28]);
    // And every one taken is served.
    let ended = 0;
    for (const h of handles) h.done.then((f) => f.reason === "length" && ended++);
    await clock.tickAsync(2000);
    assertEquals(ended, 36);
    await rt.close();
  } finally {
    clock.uninstall();
  }
});

// Issue 19: TTFT is an SLO like TBT, and a request waiting for its first token is stalling too.
// The default rules below, each against the flag that restores the rule it replaced.

Deno.test("tokenflow default: a new request joins as memory allows, overloaded or not, and a slow batch does not keep it out", () => {
  const busy = [policyRequest(1, 15, "decoding"), policyRequest(4, 30, "decoding")];
  const fresh = policyRequest(3, 5, "waiting");
  // 15 + 30 + 5 > 40 tokens/s, and a batch of three (13 tokens/s each) is slower than 30.
  assert(tokenflowPolicy().mayAdmit!(fresh, busy, TWO_SLOTS));
  assertEquals(tokenflowPolicy({ overload: "hold" }).mayAdmit!(fresh, busy, TWO_SLOTS), false);
  assertEquals(tokenflowPolicy({ keepUp: true }).mayAdmit!(fresh, busy, TWO_SLOTS), false);
});

/** A request whose buffer holds `bufferedS` seconds of playout. */
function buffered(id: number, state: Scene, bufferedS: number, prompt = 3): Request {
  const r = stage(
    testRequest(id, { ids: Array.from({ length: prompt }, (_, i) => 1 + i), readingRate: 5 }),
    state,
  );
  r.buffer.occupancy = () => ({ tokens: Math.round(bufferedS * 5), seconds: bufferedS });
  return r;
}

Deno.test("tokenflow default: a new request past its TTFT SLO is offered admission before a paused one (it stalls already); --tokenflow-late behind puts it after", () => {
  const late = testRequest(1, { ids: [1, 2, 3], slo: { ttftMs: 1000 } }, 0);
  const onTime = testRequest(2, { ids: [1, 2, 3], slo: { ttftMs: 10_000 } }, 0);
  const paused = buffered(3, "paused", 2);
  const ctx = { ...TWO_SLOTS, now: () => 3000 };
  // Slack: late -2 s, paused 2 s of playout, on time 7 s.
  assertEquals(tokenflowPolicy().order!([paused, onTime, late], ctx), [late, paused, onTime]);
  assertEquals(
    tokenflowPolicy({ late: "behind" }).order!([paused, onTime, late], ctx),
    [paused, onTime, late],
  );
});

Deno.test("tokenflow default: nobody is held back just in time while a request waits to be admitted; --tokenflow-hold-back always holds anyway", () => {
  const ahead = buffered(1, "decoding", 60);
  const waiting = [testRequest(2, { ids: [1, 2, 3] })];
  assertEquals(tokenflowPolicy().holdBack!([ahead], TWO_SLOTS, waiting).size, 0);
  assertEquals(tokenflowPolicy().holdBack!([ahead], TWO_SLOTS, []).size, 1);
  assertEquals(
    tokenflowPolicy({ holdBack: "always" }).holdBack!([ahead], TWO_SLOTS, waiting).size,
    1,
  );
});

Deno.test("tokenflow: a running request is paused for a new one only if its playout also covers the newcomer's prefill", () => {
  // No slot free, and blocks for all but one of the long newcomer's 40; a step of n rows takes
  // 20 + 10n ms, so a 16-row prefill chunk takes 180 ms.
  const ctx: PolicyContext = {
    ...TWO_SLOTS,
    maxSlots: 4,
    freeSlots: 0,
    freeBlocksPerLayer: 39,
    stepMs: (rows) => 20 + 10 * rows,
  };
  const policy = tokenflowPolicy();
  // Without a host tier, moving the victim back in is recomputing its 3 tokens: one chunk,
  // τ_in = 0.18 s; its horizon is μ·(τ_in + Δt) + μ·τ_in + 3Δt = 3.22 s. The short newcomer's
  // prefill is one chunk (μ·0.18 = 0.36 s more), the 160-token one's ten (μ·1.8 = 3.6 s more).
  const victim = buffered(1, "decoding", 4);
  const short = testRequest(2, { ids: [1, 2, 3] });
  const long = testRequest(3, { ids: Array.from({ length: 160 }, (_, i) => i + 1) });
  assertEquals(policy.pauseBeforeStep!([victim], [short], ctx), [victim]);
  assertEquals(policy.pauseBeforeStep!([victim], [long], ctx), []);
  // With playout for the long prefill too, it steps out for it.
  assertEquals(policy.pauseBeforeStep!([buffered(4, "decoding", 7)], [long], ctx).length, 1);
});
