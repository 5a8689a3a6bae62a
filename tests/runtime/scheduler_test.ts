// The runtime's scheduling on a fake engine (no GPU): admission and the queue bound, and property
// tests over thousands of random workloads with a KV pool small enough to force preemption —
// every request gets exactly the tokens its prompt alone determines, none lost, duplicated or
// reordered, cancels end streams, and the pool is empty once everything has ended.

import { distancePlanner } from "../helpers/distance_planner.ts";
import { FakeEngine, toyGeneration } from "../../sim/fake_engine.ts";
import type { CostModel, StepPlan } from "../../engine/engine.ts";
import { sumsOf } from "../../engine/kv/cost_model.ts";
import type { FakeEngineShape } from "../../sim/fake_engine.ts";
import { Refused, Runtime } from "../../runtime/service.ts";
import type { PolicyName } from "../../runtime/policy/index.ts";
import { assert, assertEquals, assertThrows } from "../helpers/testing.ts";
import { rng } from "../helpers/random.ts";
import { greedy } from "../helpers/requests.ts";

interface Setup {
  policy: PolicyName;
  prefixCache?: boolean;
  /** Always a host tier: the prefix cache's device evictions move there, and hits come back. */
  hostCache?: boolean;
  preempt?: "recompute" | "swap" | "partial";
  /** "auto": the engine gets FAKE_COSTS' cost model, and the runtime chooses by it. */
  recompute?: "off" | "auto";
  writeThrough?: boolean;
  /** Every running request's offload distance, or a distance per request that changes as it runs. */
  offloadDistance?: number | "changing";
  prefetchBlocks?: number;
  /** eLLM's token-wise caching of running requests. */
  tokenCache?: boolean;
  /** A sliding window per scenario (Mistral), small enough to bite: blocks behind it are freed. */
  slidingWindow?: boolean;
}

/**
 * A cost model for `recompute: "auto"` (blocks of KV_BLOCK_BYTES): a row costs about as much per
 * layer as copying a block of two positions, and every step and copy has a fixed cost, so which
 * option is cheapest turns on block size, length, what is on the host, and how much must go.
 */
const KV_BLOCK_BYTES = 1000;
function fakeCosts(numLayers: number): CostModel {
  const layer = { fixedMs: 0.2, perUnitMs: 0.05 };
  const copy = { fixedMs: 0.1, perUnitMs: 0.1 / KV_BLOCK_BYTES };
  return {
    numLayers,
    roundTripMs: 0,
    layer,
    sample: { fixedMs: 0.1, perUnitMs: 0.01 },
    hostToDevice: copy,
    deviceToHost: copy,
    overlap: 0,
    // Weighed so heavily that the fake engine's measured steps (microseconds) barely move it.
    layerFit: sumsOf([[1, 0.25], [8, 0.6]], 1e6),
  };
}

/** A distance in 0..3 per (request, every third token): changes mid-stream, differs per request. */
function changingDistance(req: { id: number; generated: number }): number {
  return Math.imul(req.id * 31 + Math.floor(req.generated / 3), 0x9e3779b1) >>> 30;
}

function runtimeOver(engine: FakeEngine, setup: Setup = { policy: "fcfs" }, maxQueue = 100) {
  const { offloadDistance, ...rest } = setup;
  const changing = offloadDistance === "changing";
  return new Runtime(engine, {
    ...rest,
    ...(changing ? { offload: "uniform" } : { offloadDistance }),
    maxQueue,
    maxTokensLimit: 10_000,
    eosIds: [],
  }, changing ? { planner: distancePlanner(changingDistance) } : {});
}

/** Lets the loop run (the fake engine answers in microtasks) until `done` holds, boundedly. */
async function settle(done: () => boolean = () => false): Promise<void> {
  for (let i = 0; i < 50 && !done(); i++) await new Promise((r) => setTimeout(r, 0));
}

/** Yields `n` times to the microtask queue: the loop and the readers make some progress. */
async function ticks(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await null;
}

Deno.test("the queue bound counts only requests that must wait: 40 at once, 32 slots, max queue 4", async () => {
  const engine = new FakeEngine({ maxSlots: 32, maxRows: 64, blocksPerArena: [4096] });
  const runtime = runtimeOver(engine, { policy: "fcfs" }, 4);
  let refused = 0;
  const handles = [];
  for (let i = 0; i < 40; i++) {
    try {
      handles.push(runtime.submit({ ids: [1, 2, 3, i], maxTokens: 3, sampling: greedy() }));
    } catch (err) {
      assert(err instanceof Refused && err.code === "queue_full");
      assert(err.retryAfterS >= 1);
      refused++;
    }
  }
  assertEquals(refused, 4);
  const s = runtime.stats();
  assertEquals([s.running, s.waiting], [32, 4]);
  await Promise.all(handles.map(async (h) => {
    for await (const _ of h.tokens);
    assertEquals((await h.done).reason, "length");
  }));
  await runtime.close();
});

Deno.test("max queue 0 still takes every request that can run at once", async () => {
  const engine = new FakeEngine({ maxSlots: 2 });
  const runtime = runtimeOver(engine, { policy: "fcfs" }, 0);
  const a = runtime.submit({ ids: [5], maxTokens: 2, sampling: greedy() });
  const b = runtime.submit({ ids: [6], maxTokens: 2, sampling: greedy() });
  assertThrows(
    () => runtime.submit({ ids: [7], maxTokens: 2, sampling: greedy() }),
    (e: unknown) => e instanceof Refused,
  );
  for (const h of [a, b]) for await (const _ of h.tokens);
  await settle();
  const c = runtime.submit({ ids: [8], maxTokens: 2, sampling: greedy() });
  for await (const _ of c.tokens);
  await runtime.close();
});

Deno.test("a request longer than the pool is refused at submit, not queued forever", async () => {
  const engine = new FakeEngine({ blocksPerArena: [8], numLayers: 2, blockSize: 4 }); // 16 positions
  const runtime = runtimeOver(engine);
  assertThrows(
    () => runtime.submit({ ids: new Array(16).fill(1), maxTokens: 1, sampling: greedy() }),
    /context/,
  );
  assertThrows(
    () => runtime.submit({ ids: new Array(10).fill(1), maxTokens: 7, sampling: greedy() }),
    /context/,
  );
  await runtime.close();
});

interface Scenario {
  shape: FakeEngineShape;
  requests: {
    prompt: number[];
    maxTokens: number;
    seed: number;
    stopIds: number[];
    /** Cancel after reading this many tokens (or at once when 0); undefined: read to the end. */
    cancelAfter?: number;
    /** Submitted after the runtime has had this many rounds of ten microtask turns. */
    delayTicks: number;
  }[];
}

function randomScenario(next: () => number): Scenario {
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const numLayers = int(1, 3);
  const arenas = int(1, numLayers);
  const layerArena = Array.from(
    { length: numLayers },
    (_, l) => Math.floor((l * arenas) / numLayers),
  );
  const blockSize = int(1, 5);
  const perLayer = int(6, 24);
  const blocksPerArena = Array.from(
    { length: arenas },
    (_, a) => perLayer * layerArena.filter((x) => x === a).length,
  );
  const vocab = int(5, 60);
  const shape = {
    numLayers,
    layerArena,
    blockSize,
    blocksPerArena,
    maxSlots: int(1, 6),
    maxRows: int(6, 16),
    ringSize: int(1, 3),
    vocabSize: vocab,
    maxBlocksPerSeq: perLayer,
    // Sometimes none, sometimes too small for everyone, sometimes ample.
    hostBlocks: int(0, 2 * perLayer * numLayers),
  };
  const context = perLayer * blockSize;
  const randomTokens = (n: number) => Array.from({ length: n }, () => int(0, vocab - 1));
  // Shared openings (a system prompt, an earlier chat turn) that some prompts start with.
  const openings = [randomTokens(context), randomTokens(context)];
  const requests = Array.from({ length: int(1, 10) }, () => {
    const promptLength = int(1, Math.max(1, Math.floor(context / 2)));
    const maxTokens = int(0, Math.min(24, context - promptLength));
    const roll = next();
    const shared = next() < 0.5 ? int(0, promptLength) : 0;
    return {
      prompt: [
        ...openings[int(0, 1)].slice(0, shared),
        ...randomTokens(promptLength - shared),
      ],
      maxTokens,
      seed: int(0, 1000),
      stopIds: next() < 0.3 ? [int(0, vocab - 1)] : [],
      cancelAfter: roll < 0.15 ? int(0, 5) : undefined,
      delayTicks: int(0, 3),
    };
  });
  return { shape, requests };
}

async function runScenario(
  s: Scenario,
  setup: Setup,
): Promise<
  {
    preemptions: number;
    prefixHits: number;
    hostHits: number;
    swapsIn: number;
    written: number;
    refilled: number;
    prefetched: number;
    restored: number;
    swapped: number;
    droppedOldest: number;
    droppedAll: number;
    uncachings: number;
    windowReleased: number;
  }
> {
  const engine = new FakeEngine(
    setup.recompute === "auto"
      ? { ...s.shape, costModel: fakeCosts(s.shape.numLayers!), kvBlockBytes: KV_BLOCK_BYTES }
      : s.shape,
  );
  const runtime = runtimeOver(engine, setup);
  const policy = setup.policy;
  const vocab = engine.info.vocabSize;
  const runs = [];
  for (const r of s.requests) {
    await ticks(r.delayTicks * 10);
    const ctrl = new AbortController();
    const handle = runtime.submit({
      ids: r.prompt,
      maxTokens: r.maxTokens,
      sampling: greedy(r.seed),
      stopIds: r.stopIds,
      signal: ctrl.signal,
    });
    if (r.cancelAfter === 0) ctrl.abort();
    runs.push((async () => {
      const got: number[] = [];
      for await (const ev of handle.tokens) {
        got.push(ev.id);
        if (got.length === r.cancelAfter) ctrl.abort();
      }
      return { got, finish: await handle.done };
    })());
  }
  // No starvation: every request ends (a stuck one fails the scenario instead of hanging the test).
  let watchdog: ReturnType<typeof setTimeout> | undefined;
  const stuck = new Promise<never>((_, reject) => {
    watchdog = setTimeout(() => {
      const st = runtime.stats();
      reject(new Error(`stuck: ${JSON.stringify({ ...st, requests: st.requests })}`));
    }, 5000);
  });
  const results = await Promise.race([Promise.all(runs), stuck]).finally(() =>
    clearTimeout(watchdog)
  );
  // What a sample reads is the union of its layers' windows: all of it once one layer has none.
  const windows = engine.info.layerWindows ?? [engine.info.slidingWindow ?? 0];
  const contextWindow = windows.includes(0) ? undefined : Math.max(...windows);
  results.forEach(({ got, finish }, i) => {
    const r = s.requests[i];
    const want = toyGeneration(
      r.prompt,
      r.maxTokens,
      r.seed,
      vocab,
      new Set(r.stopIds),
      contextWindow,
    );
    if (finish.reason === "cancelled") {
      assertEquals(
        got,
        want.slice(0, got.length),
        `request ${i}: cancelled stream is not a prefix`,
      );
      return;
    }
    assertEquals(
      got,
      want,
      `request ${i} (${policy}): got ${got} want ${want}, ${JSON.stringify(finish)}`,
    );
    assertEquals(finish.reason, want.length < r.maxTokens ? "stop" : "length");
    assertEquals(finish.completionTokens, want.length);
  });
  await settle(() => runtime.stats().kvBlocksUsed === 0 && runtime.openRequests === 0);
  const stats = runtime.stats();
  assertEquals(stats.kvBlocksUsed, 0, "blocks left allocated after every request ended");
  assertEquals(stats.running + stats.waiting + stats.paused, 0);
  assertEquals(stats.hostBlocksUsed, 0, "host blocks left allocated after every request ended");
  if (stats.prefix) {
    // Every block left is one the cache keeps, in the tier its entry says, and none is missing.
    assertEquals(stats.kvBlocksCached, stats.prefix.deviceBlocks, "device blocks nothing holds");
    assertEquals(stats.hostBlocksCached, stats.prefix.hostBlocks, "host blocks nothing holds");
  }
  const choices = stats.preemptChoices;
  assertEquals(choices.swap + choices.dropOldest + choices.dropAll, stats.preemptions);
  await runtime.close();
  return {
    preemptions: stats.preemptions,
    prefixHits: stats.prefix?.hitBlocks ?? 0,
    hostHits: stats.prefix?.hostHitBlocks ?? 0,
    swapsIn: stats.swaps?.swapsIn ?? 0,
    written: stats.swaps?.blocksWrittenThrough ?? 0,
    refilled: stats.partialResumes,
    prefetched: stats.offload?.blocksPrefetched ?? 0,
    restored: stats.offload?.blocksRestored ?? 0,
    swapped: choices.swap,
    droppedOldest: choices.dropOldest,
    droppedAll: choices.dropAll,
    uncachings: stats.tokenCache?.uncachings ?? 0,
    windowReleased: stats.windowReleasedBlocks,
  };
}

const PROPERTY_CASES: (Setup & { seed: number })[] = [
  { policy: "fcfs", seed: 2024 },
  { policy: "reserve", seed: 7 },
  { policy: "fcfs", prefixCache: true, seed: 99 },
  { policy: "fcfs", preempt: "swap", seed: 5 },
  { policy: "fcfs", preempt: "swap", writeThrough: true, prefixCache: true, seed: 31 },
  { policy: "fcfs", preempt: "partial", seed: 77 },
  { policy: "fcfs", preempt: "partial", prefixCache: true, writeThrough: true, seed: 78 },
  { policy: "fcfs", offloadDistance: 1, prefetchBlocks: 3, seed: 11 },
  { policy: "fcfs", offloadDistance: 2, prefetchBlocks: 5, preempt: "swap", seed: 12 },
  {
    policy: "fcfs",
    offloadDistance: "changing",
    prefetchBlocks: 4,
    preempt: "swap",
    writeThrough: true,
    prefixCache: true,
    seed: 13,
  },
  {
    policy: "reserve",
    offloadDistance: "changing",
    prefetchBlocks: 2,
    prefixCache: true,
    seed: 14,
  },
  { policy: "fcfs", offloadDistance: "changing", prefetchBlocks: 3, preempt: "partial", seed: 15 },
  { policy: "fcfs", recompute: "auto", seed: 16 },
  { policy: "fcfs", recompute: "auto", writeThrough: true, prefixCache: true, seed: 17 },
  {
    policy: "fcfs",
    recompute: "auto",
    writeThrough: true,
    offloadDistance: "changing",
    prefetchBlocks: 3,
    seed: 18,
  },
  { policy: "fcfs", prefixCache: true, hostCache: true, seed: 19 },
  {
    policy: "fcfs",
    prefixCache: true,
    hostCache: true,
    preempt: "partial",
    offloadDistance: "changing",
    prefetchBlocks: 3,
    seed: 20,
  },
  // No cost model on the fake engine: slo's gate is open, so this is fcfs through the runtime.
  { policy: "slo", preempt: "partial", prefixCache: true, seed: 41 },
  { policy: "fcfs", tokenCache: true, seed: 51 },
  {
    policy: "fcfs",
    tokenCache: true,
    recompute: "auto",
    writeThrough: true,
    prefixCache: true,
    hostCache: true,
    seed: 52,
  },
  { policy: "fcfs", slidingWindow: true, seed: 61 },
  { policy: "fcfs", slidingWindow: true, preempt: "partial", prefixCache: true, seed: 62 },
  { policy: "reserve", slidingWindow: true, prefixCache: true, seed: 63 },
  // A host tier keeps whole tables: the window still bounds what is read, nothing is freed.
  { policy: "fcfs", slidingWindow: true, preempt: "swap", writeThrough: true, seed: 64 },
];

for (const { seed, ...setup } of PROPERTY_CASES) {
  const what = [
    setup.policy,
    setup.preempt === "swap" ? "swapping to the host" : "",
    setup.preempt === "partial" ? "dropping only the oldest KV" : "",
    setup.recompute === "auto" ? "swap or drop chosen by cost" : "",
    setup.tokenCache ? "running requests' oldest KV uncached (eLLM)" : "",
    setup.slidingWindow ? "a sliding window" : "",
    setup.writeThrough ? "write-through" : "",
    setup.prefixCache ? `the prefix cache${setup.hostCache ? " on both tiers" : ""}` : "",
    setup.offloadDistance === "changing"
      ? "offload distances changing mid-stream"
      : setup.offloadDistance
      ? `offload distance ${setup.offloadDistance}`
      : "",
  ].filter(Boolean).join(", ");
  Deno.test(`property: ${what}: 3000 random workloads lose, duplicate and reorder no token and leak no block`, async () => {
    const next = rng(seed);
    const total = {
      preemptions: 0,
      prefixHits: 0,
      hostHits: 0,
      swapsIn: 0,
      written: 0,
      refilled: 0,
      prefetched: 0,
      restored: 0,
      swapped: 0,
      droppedOldest: 0,
      droppedAll: 0,
      uncachings: 0,
      windowReleased: 0,
    };
    for (let i = 0; i < 3000; i++) {
      const s = randomScenario(next);
      if (setup.slidingWindow) {
        const { shape } = s;
        const window = 1 + Math.floor(next() * 3 * shape.blockSize!);
        // Half the scenarios window every layer (Mistral), half only some (Gemma's local layers).
        if (next() < 0.5) shape.slidingWindow = window;
        else {
          shape.layerWindows = Array.from(
            { length: shape.numLayers ?? 2 },
            (_, layer) => layer % 2 === 0 || next() < 0.3 ? window : 0,
          );
        }
        // Without a host tier the blocks behind the window are freed (a tier keeps them).
        if (setup.preempt !== "swap") shape.hostBlocks = 0;
      }
      if (setup.tokenCache) {
        // Token-wise caching is refused unless every layer shares one arena and there are two or
        // more (tested in token_cache_test.ts): one arena holds what the several did.
        if (s.shape.numLayers! < 2) continue;
        s.shape.blocksPerArena = [s.shape.blocksPerArena!.reduce((a, b) => a + b, 0)];
        s.shape.layerArena = s.shape.layerArena!.map(() => 0);
      }
      if (setup.hostCache) s.shape.hostBlocks ||= s.shape.maxBlocksPerSeq! * s.shape.numLayers!;
      if (setup.offloadDistance !== undefined) {
        // Offloading needs a host tier; the region comes on top of the pool the requests are
        // sized for, so every request still fits alone.
        const { shape } = s;
        shape.hostBlocks ||= shape.maxBlocksPerSeq! * shape.numLayers!;
        shape.blocksPerArena = shape.blocksPerArena!.map((n) => n + setup.prefetchBlocks!);
      }
      try {
        const r = await runScenario(s, setup);
        for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += r[k];
      } catch (err) {
        throw new Error(`scenario ${i}: ${(err as Error).message}\n${JSON.stringify(s)}`);
      }
    }
    // Each mechanism must actually have been exercised, or the test proves nothing about it.
    if (setup.policy === "fcfs" || setup.policy === "slo") {
      assert(total.preemptions > 100, `only ${total.preemptions} preemptions`);
    } else assertEquals(total.preemptions, 0);
    if (setup.prefixCache) assert(total.prefixHits > 1000, `only ${total.prefixHits} prefix hits`);
    if (setup.hostCache) assert(total.hostHits > 300, `only ${total.hostHits} host-tier hits`);
    if (setup.preempt === "swap") assert(total.swapsIn > 100, `only ${total.swapsIn} swap-ins`);
    if (setup.offloadDistance !== undefined) {
      assert(total.prefetched > 1000, `only ${total.prefetched} blocks prefetched`);
    }
    if (setup.offloadDistance === "changing") {
      assert(total.restored > 100, `only ${total.restored} blocks restored by distance changes`);
    }
    if (setup.recompute === "auto") {
      // The cost model's every choice is made, often: each is checked by the tokens above.
      const { swapped, droppedOldest, droppedAll } = total;
      assert(
        Math.min(swapped, droppedOldest, droppedAll) > 100,
        `chosen: swap ${swapped}, drop oldest ${droppedOldest}, drop all ${droppedAll}`,
      );
      if (!setup.offloadDistance) assert(total.refilled > 100, `only ${total.refilled} refills`);
    }
    if (setup.tokenCache) assert(total.uncachings > 300, `only ${total.uncachings} uncachings`);
    if (setup.slidingWindow && setup.preempt !== "swap") {
      assert(total.windowReleased > 1000, `only ${total.windowReleased} blocks freed by windows`);
    }
    if (setup.writeThrough) {
      assert(total.written > 1000, `only ${total.written} blocks written through`);
      if (setup.preempt === "partial") {
        assert(total.refilled > 100, `only ${total.refilled} partial resumes`);
      }
    }
  });
}

/** A fake engine that keeps every step's plan. */
class RecordingEngine extends FakeEngine {
  readonly plans: StepPlan[] = [];
  override step(plan: StepPlan) {
    this.plans.push(structuredClone(plan));
    return super.step(plan);
  }
}

Deno.test("a cached prefix the device evicted to the host is copied back in, and only the uncached tail is computed", async () => {
  // 8 blocks of 4 positions per layer on the device, room for 16 per layer on the host.
  const shape = {
    numLayers: 2,
    blockSize: 4,
    blocksPerArena: [16],
    maxBlocksPerSeq: 8,
    maxSlots: 2,
    vocabSize: 50,
    hostBlocks: 32,
  };
  const engine = new RecordingEngine(shape);
  const runtime = runtimeOver(engine, { policy: "fcfs", prefixCache: true });
  const read = async (ids: number[], maxTokens: number) => {
    const h = runtime.submit({ ids, maxTokens, sampling: greedy(), stopIds: [] });
    const got: number[] = [];
    for await (const ev of h.tokens) got.push(ev.id);
    assertEquals(got, toyGeneration(ids, maxTokens, 0, 50));
    await settle(() => runtime.stats().kvBlocksUsed === 0);
    return got;
  };
  const opening = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8]; // three full blocks
  await read([...opening, 7], 2);
  // Other work takes every device block: the opening's cached blocks move to the host.
  await read(Array.from({ length: 28 }, (_, i) => 10 + i), 4);
  let prefix = runtime.stats().prefix!;
  assert(prefix.demotions >= 3, `only ${prefix.demotions} entries moved to the host`);
  assertEquals(prefix.hostHitBlocks, 0);

  const from = engine.plans.length;
  const b = [...opening, 9, 9, 3];
  const tokens = await read(b, 3);
  const plans = engine.plans.slice(from);
  // Its first step copies the opening's three blocks of both layers in, then computes the tail.
  const ins = plans[0].copies!.filter((c) => c.direction === "in");
  assertEquals(ins.flatMap((c) => c.deviceBlocks).length, 3 * 2);
  assertEquals(plans[0].rows.map((r) => r.pos), [12, 13, 14]);
  // Nothing else is computed but its two decodes, and nothing else is copied in.
  assertEquals(plans.flatMap((p) => p.rows.map((r) => r.pos)), [12, 13, 14, 15, 16]);
  const later = plans.slice(1).flatMap((p) => p.copies ?? []);
  assertEquals(later.filter((c) => c.direction === "in"), []);
  prefix = runtime.stats().prefix!;
  assertEquals([prefix.hitBlocks, prefix.hostHitBlocks], [3, 3]);
  await runtime.close();

  // Without the cache, the same tokens.
  const plain = runtimeOver(new FakeEngine(shape), { policy: "fcfs" });
  const h = plain.submit({ ids: b, maxTokens: 3, sampling: greedy(), stopIds: [] });
  const alone: number[] = [];
  for await (const ev of h.tokens) alone.push(ev.id);
  assertEquals(alone, tokens);
  await plain.close();
});
