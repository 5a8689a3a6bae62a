// LayerKV's layer-wise prefill (runtime/placement.ts, `layerwisePrefill`) under `--sched slo`, on
// the fake engine: every admission gets a layer split; a prompt whose full KV does not fit beside
// the running requests is admitted with some layers offloaded, its peak device footprint stays
// below its full KV, and its offloaded layers' blocks go to the host tier; a split counts what an
// offloaded layer keeps on the device, so it does not overcommit; nothing leaks on either tier
// when it finishes, is cancelled or paused; and over random workloads every request gets the
// tokens it gets with layer-wise prefill off (which are the tokens its prompt alone determines).

import { FakeEngine, toyGeneration } from "../../sim/fake_engine.ts";
import type { FakeEngineShape } from "../../sim/fake_engine.ts";
import type { BlockPool } from "../../runtime/kv/block_pool.ts";
import { Scheduler } from "../../runtime/scheduler.ts";
import { OFFLOADED, type Offloader } from "../../runtime/kv/offload.ts";
import { Request } from "../../runtime/request/request.ts";
import { sloPolicy } from "../../runtime/policy/slo.ts";
import { layerkvPolicy } from "../../runtime/policy/layerkv.ts";
import type { SchedulingPolicy } from "../../runtime/policy/policy.ts";
import { isOffloaded } from "../../runtime/kv/offload_pattern.ts";
import { Runtime } from "../../runtime/service.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { rng } from "../helpers/random.ts";
import { greedy, testRequest } from "../helpers/requests.ts";

/**
 * The runtime's wiring (runtime/service.ts) with `--sched slo --offload none`, stepped by hand:
 * a host tier, the swapper, and (with layer-wise prefill on) the offloader and its region.
 */
class Bench {
  readonly engine: FakeEngine;
  readonly pool: BlockPool;
  readonly host: BlockPool;
  readonly offloader: Offloader | null;
  readonly scheduler: Scheduler;
  private nextId = 1;

  constructor(
    shape: FakeEngineShape,
    layerwise: boolean,
    regionBlocks: number,
    policy: SchedulingPolicy = sloPolicy,
  ) {
    this.engine = new FakeEngine(shape);
    const info = this.engine.info;
    this.scheduler = new Scheduler({
      kv: {
        shape: info,
        placing: {
          offload: "none",
          distance: 0,
          offloads: false,
          layerwisePrefill: layerwise,
          prefetchBlocks: regionBlocks,
        },
      },
      limits: info,
      policy,
    });
    const { space } = this.scheduler;
    this.pool = space.pool;
    this.host = space.host!.pool;
    this.offloader = space.offloader;
  }

  submit(prompt: number[], maxTokens: number): Request {
    const req = testRequest(this.nextId++, { ids: prompt, maxTokens });
    this.scheduler.submit(req);
    return req;
  }

  /** One step, run and delivered; false when nothing could run. */
  async step(): Promise<boolean> {
    const built = this.scheduler.schedule();
    if (!built) return false;
    const records = await this.engine.step(built.plan);
    this.scheduler.deliver(built, records);
    return true;
  }

  /** Device blocks held outside the prefetch region (which the offloader keeps for good). */
  get deviceUsed(): number {
    return this.pool.used - (this.offloader?.regionTotal ?? 0);
  }
}

// 4 layers of blocks of 4 positions, 8 rows a step; 128 device blocks (32 a layer) plus a prefetch
// region of 28 blocks (a long prompt's offloaded layers fit it whole); an ample host tier. With
// layer-wise prefill off there is no region: its blocks are the requests'.
const shape = (region: number): FakeEngineShape => ({
  numLayers: 4,
  blockSize: 4,
  blocksPerArena: [128 + region],
  maxSlots: 4,
  maxRows: 8,
  maxBlocksPerSeq: 32,
  vocabSize: 50,
  hostBlocks: 512,
});
const SHAPE = shape(28);
const REGION = 28;
/** The long prompt: 28 blocks a layer, 112 in all. */
const LONG = 112;

const ids = (n: number, from: number) => Array.from({ length: n }, (_, i) => (from + 7 * i) % 50);

/**
 * A short request runs (48 tokens: 12 blocks a layer, growing by one every 4 tokens it decodes);
 * a LONG-token prompt arrives once it decodes, when 104 blocks are free of the 112 it needs (76
 * with the region set aside). Steps until everything ends, calling `watch` after each step.
 */
async function longBesideShort(
  layerwise: boolean,
  watch: (bench: Bench, long: Request, step: number) => void = () => {},
  { shortTokens = 8, region = REGION, policy = sloPolicy } = {},
) {
  const bench = new Bench(shape(region), layerwise, region, policy);
  const short = [bench.submit(ids(48, 1), shortTokens)];
  for (let i = 0; i < 7; i++) await bench.step();
  assertEquals(short[0].state, "decoding");
  const long = bench.submit(ids(LONG, 3), 4);
  let steps = 0;
  while (bench.scheduler.hasWork) {
    // Null once the last finished requests are reaped; never while any still wants to run.
    if (!await bench.step() && bench.scheduler.hasWork) throw new Error("stuck: nothing ran");
    watch(bench, long, steps++);
    if (steps > 500) throw new Error("stuck: 500 steps");
  }
  for (const r of [...short, long]) {
    assertEquals(r.finish?.reason, "length");
    assertEquals(r.generated, toyGeneration(r.spec.ids, r.spec.maxTokens, 0, 50));
  }
  return { bench, long, short };
}

Deno.test("layer-wise prefill: a prompt whose full KV does not fit beside running requests is admitted with layers offloaded, its peak device blocks below its full KV", async () => {
  // Off: it waits while the short requests run (its 48 blocks never fit beside them).
  let admittedOffAt = -1;
  await longBesideShort(false, (bench, long, step) => {
    if (admittedOffAt < 0 && long.state !== "waiting") admittedOffAt = step;
    if (long.state === "waiting") assert(bench.scheduler.running.length > 0);
    assertEquals(long.preemptions, 0);
  });

  let admittedAt = -1, distance = 0, peak = 0, offloadedSeen = 0, hostSeen = 0;
  const { bench, long } = await longBesideShort(true, (bench, long, step) => {
    const d = bench.offloader!.distanceOf(long);
    if (admittedAt < 0 && long.state !== "waiting") {
      admittedAt = step;
      distance = d;
      // Admitted while the short request still runs.
      assertEquals(bench.scheduler.running.length, 2);
    }
    if (long.state !== "prefilling") return;
    // Its footprint while it prefills (once it decodes, with --offload none its layers come back
    // to the device as room allows).
    peak = Math.max(peak, bench.pool.heldBy(long.id));
    // While it prefills it keeps at least its admission offload.
    assert(d > 0 && d <= distance, `distance ${d} while prefilling (admitted at ${distance})`);
    for (let l = 0; l < 4; l++) {
      const device = bench.pool.table(long.id, l);
      const onHost = bench.host.table(long.id, l).length;
      if (isOffloaded(d, l)) {
        offloadedSeen += device.filter((b) => b === OFFLOADED).length;
        hostSeen += onHost;
      } else {
        // A resident layer holds its whole prompt from admission on, all on the device.
        assertEquals(device.length, LONG / 4);
        assert(device.every((b) => b >= 0));
        assertEquals(onHost, 0);
      }
    }
  });
  assertEquals(bench.scheduler.space.layerwiseAdmissions, 1);
  assert(
    admittedAt >= 0 && admittedAt < admittedOffAt,
    `on: step ${admittedAt}, off: ${admittedOffAt}`,
  );
  assert(distance > 0);
  assertEquals(long.preemptions, 0);
  const full = 4 * LONG / 4;
  assert(peak <= (3 * full) / 4, `peak ${peak} device blocks of its full ${full}`);
  assert(offloadedSeen > 0, "no offloaded layer's block left the device");
  assert(hostSeen > 0, "no offloaded layer's block reached the host tier");
  assert(bench.offloader!.stats.blocksPrefetched > 0);
  // Finished: nothing is left on either tier but the region.
  assertEquals([bench.deviceUsed, bench.host.used], [0, 0]);
  assertEquals(bench.pool.sequences(), ["prefetch-region"]);
});

Deno.test("layer-wise prefill (Eq. 5): when the running requests' growth would run the device dry, a decoding request's kept layers go to the host, and a prompt that fitted in no split starts beside them", async () => {
  for (const policy of [sloPolicy, layerkvPolicy]) {
    const bench = new Bench(SHAPE, true, REGION, policy);
    // Two requests of 56 positions (14 blocks a layer, 112 in all), each to grow by 24 more (6
    // blocks a layer): 16 of 128 blocks free, 48 wanted. The forecast runs short as soon as the
    // first decodes, and its kept layers go to the host, x/2 then x.
    const short = [bench.submit(ids(56, 1), 24), bench.submit(ids(56, 2), 24)];
    for (let i = 0; i < 16; i++) await bench.step();
    assert(short.every((r) => r.state === "decoding"));
    assert(bench.scheduler.space.reliefLayers > 0, "no kept layer went to the host");
    assert(short.some((r) => bench.offloader!.distanceOf(r) > 0));
    // The long prompt (28 blocks a layer; all 4 offloaded, 36 blocks while it prefills) starts
    // while both still decode.
    const long = bench.submit(ids(LONG, 3), 4);
    let admittedBeside = false;
    for (let step = 0; bench.scheduler.hasWork; step++) {
      await bench.step();
      if (long.state !== "waiting" && !admittedBeside) {
        admittedBeside = short.every((r) => r.state === "decoding");
      }
      if (step > 500) throw new Error("stuck");
    }
    assert(admittedBeside, "the long prompt waited for a running request to finish");
    for (const r of [...short, long]) {
      assertEquals(r.preemptions, 0);
      assertEquals(r.generated, toyGeneration(r.spec.ids, r.spec.maxTokens, 0, 50));
    }
    assertEquals([bench.deviceUsed, bench.host.used], [0, 0]);
  }
});

Deno.test("layer-wise prefill: cancelling a layer-wise admission mid-prefill frees its blocks on both tiers", async () => {
  let cancelledAt = -1;
  const { bench, long } = await (async () => {
    const bench = new Bench(SHAPE, true, REGION);
    const short = [bench.submit(ids(48, 1), 12)];
    for (let i = 0; i < 7; i++) await bench.step();
    const long = bench.submit(ids(LONG, 3), 4);
    for (let step = 0; bench.scheduler.hasWork; step++) {
      await bench.step();
      if (cancelledAt < 0 && long.state === "prefilling" && bench.host.heldBy(long.id) > 0) {
        assert(bench.offloader!.offloads(long));
        assert(bench.pool.heldBy(long.id) > 0);
        long.cancel();
        cancelledAt = step;
      } else if (cancelledAt >= 0 && long.finish) {
        // Reaped at the step boundary: all its blocks are free on both tiers.
        assertEquals(long.finish.reason, "cancelled");
        assertEquals([bench.pool.heldBy(long.id), bench.host.heldBy(long.id)], [0, 0]);
        assertEquals(bench.pool.table(long.id, 0), []);
      }
      if (step > 500) throw new Error("stuck");
    }
    for (const r of short) {
      assertEquals(r.generated, toyGeneration(r.spec.ids, 12, 0, 50));
    }
    return { bench, long };
  })();
  assert(cancelledAt >= 0, "never had host blocks to cancel with");
  assertEquals(long.finish?.reason, "cancelled");
  assertEquals([bench.deviceUsed, bench.host.used], [0, 0]);
});

Deno.test("layer-wise prefill: with a small region the Eq. 5 relief frees little; an overcommitted device preempts, and every token and block still comes out right", async () => {
  // A region of 8 blocks: only the first 8 blocks of an offloaded layer leave the device, so its
  // other 20 stay, and offloading saves the long prompt almost nothing. Admission no longer keeps
  // a reserve for the short request's growth (Eq. 5 relieves instead of reserving, §3.1.1), and
  // the relief can free only the region's share: the newest request may be preempted, as under
  // vLLM, and still gets exactly its tokens (longBesideShort checks them), with nothing leaked.
  const { bench } = await longBesideShort(true, () => {}, { region: 8, shortTokens: 40 });
  assert(bench.scheduler.space.prefillSplits >= 2);
  assertEquals([bench.deviceUsed, bench.host.used], [0, 0]);
});

Deno.test("layer-wise prefill: a layer-wise admission paused mid-prefill frees its blocks on both tiers, then finishes with the same tokens", async () => {
  // A policy that pauses the long prompt once, as soon as some of its KV is on the host, and
  // keeps it out for one step (else it is admitted again at once, in the same schedule()).
  let paused = 0, pausedSeen = 0, holdOut = 0;
  let onHost = (_id: number) => 0;
  const pausing: SchedulingPolicy = {
    ...sloPolicy,
    pauseBeforeStep: (running) =>
      running.filter((r) =>
        paused === 0 && r.spec.ids.length === LONG && r.state === "prefilling" &&
        onHost(r.id) > 0 && paused++ === 0 && (holdOut = 1) > 0
      ),
    mayAdmit: (req, running, ctx) =>
      req.spec.ids.length === LONG && holdOut-- > 0
        ? false
        : sloPolicy.mayAdmit!(req, running, ctx),
  };
  const { bench, long } = await longBesideShort(true, (bench, long) => {
    onHost = (id) => bench.host.heldBy(id);
    if (long.state === "paused") {
      pausedSeen++;
      assertEquals([bench.pool.heldBy(long.id), bench.host.heldBy(long.id)], [0, 0]);
      assertEquals(bench.offloader!.distanceOf(long), 0);
    }
  }, { policy: pausing });
  assert(paused === 1 && pausedSeen > 0, "the layer-wise admission was not paused");
  assertEquals(long.preemptions, 1);
  // Admitted twice, split each time.
  assertEquals(bench.scheduler.space.prefillSplits, 3);
  assertEquals([bench.deviceUsed, bench.host.used], [0, 0]);
});

// Random workloads through the runtime: layer-wise prefill on and off.

interface Workload {
  shape: FakeEngineShape;
  /** The preset: slo, layerkv or tokenflow (which take layer-wise prefill). */
  policy: "slo" | "layerkv" | "tokenflow";
  prefetchBlocks: number;
  preempt: "recompute" | "swap" | "partial";
  prefixCache: boolean;
  requests: {
    prompt: number[];
    maxTokens: number;
    seed: number;
    /** Cancel after reading this many tokens (0: at once); undefined: read to the end. */
    cancelAfter?: number;
    delayTicks: number;
  }[];
}

function randomWorkload(next: () => number): Workload {
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const numLayers = int(2, 5);
  const arenas = int(1, 2);
  const layerArena = Array.from(
    { length: numLayers },
    (_, l) => Math.floor((l * arenas) / numLayers),
  );
  const blockSize = int(1, 4);
  const perLayer = int(8, 20);
  const prefetchBlocks = int(2, perLayer);
  const vocab = int(5, 60);
  const shape: FakeEngineShape = {
    numLayers,
    layerArena,
    blockSize,
    // The region comes on top of what the requests are sized for.
    blocksPerArena: Array.from(
      { length: arenas },
      (_, a) => perLayer * layerArena.filter((x) => x === a).length + prefetchBlocks,
    ),
    maxSlots: int(2, 6),
    // Few rows a step: long prompts take several chunks.
    maxRows: int(2, 8),
    ringSize: int(1, 3),
    vocabSize: vocab,
    maxBlocksPerSeq: perLayer,
    hostBlocks: int(2, 4) * perLayer * numLayers,
  };
  const context = perLayer * blockSize;
  const opening = Array.from({ length: context }, () => int(0, vocab - 1));
  const requests = Array.from({ length: int(2, 8) }, () => {
    // Often long: a prompt that cannot fit beside others is what layer-wise prefill is for.
    const promptLength = int(1, Math.max(1, context - 2));
    const maxTokens = int(0, Math.min(10, context - promptLength));
    const shared = next() < 0.3 ? int(0, promptLength) : 0;
    const roll = next();
    return {
      prompt: [
        ...opening.slice(0, shared),
        ...Array.from({ length: promptLength - shared }, () => int(0, vocab - 1)),
      ],
      maxTokens,
      seed: int(0, 1000),
      cancelAfter: roll < 0.15 ? int(0, 4) : undefined,
      delayTicks: int(0, 3),
    };
  });
  const preempt = (["recompute", "swap", "partial"] as const)[int(0, 2)];
  const prefixCache = next() < 0.3;
  // Drawn last, so the workloads drawn before it stay as they were.
  const policy = (["slo", "layerkv", "tokenflow"] as const)[int(0, 2)];
  return { shape, policy, prefetchBlocks, preempt, prefixCache, requests };
}

async function ticks(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await null;
}

async function settle(done: () => boolean): Promise<void> {
  for (let i = 0; i < 50 && !done(); i++) await new Promise((r) => setTimeout(r, 0));
}

/** Runs `w` through the runtime; each request's tokens and how it ended, and the run's stats. */
async function runWorkload(w: Workload, layerwisePrefill: boolean) {
  const engine = new FakeEngine(w.shape);
  const runtime = new Runtime(engine, {
    policy: w.policy,
    layerwisePrefill,
    prefetchBlocks: layerwisePrefill ? w.prefetchBlocks : undefined,
    preempt: w.preempt,
    prefixCache: w.prefixCache,
    maxQueue: 100,
    maxTokensLimit: 10_000,
    eosIds: [],
  });
  const runs = [];
  for (const r of w.requests) {
    await ticks(r.delayTicks * 10);
    const ctrl = new AbortController();
    const handle = runtime.submit({
      ids: r.prompt,
      maxTokens: r.maxTokens,
      sampling: greedy(r.seed),
      stopIds: [],
      signal: ctrl.signal,
    });
    if (r.cancelAfter === 0) ctrl.abort();
    runs.push((async () => {
      const got: number[] = [];
      for await (const ev of handle.tokens) {
        got.push(ev.id);
        if (got.length === r.cancelAfter) ctrl.abort();
      }
      const done = await handle.done;
      return { got, reason: done.reason, error: done.error };
    })());
  }
  let watchdog: ReturnType<typeof setTimeout> | undefined;
  const stuck = new Promise<never>((_, reject) => {
    watchdog = setTimeout(() => {
      reject(new Error(`stuck: ${JSON.stringify(runtime.stats())}`));
    }, 5000);
  });
  const results = await Promise.race([Promise.all(runs), stuck]).finally(() =>
    clearTimeout(watchdog)
  );
  await settle(() => runtime.stats().kvBlocksUsed === 0 && runtime.openRequests === 0);
  const stats = runtime.stats();
  await runtime.close();
  return { results, stats };
}

Deno.test("property: layer-wise prefill (slo, layerkv or tokenflow) gives every request of 500 random workloads the tokens it gets with it off, and leaks no block on either tier", async () => {
  const next = rng(4242);
  let layerwise = 0, prefetched = 0, splits = 0, afterLayer = 0;
  for (let i = 0; i < 500; i++) {
    const w = randomWorkload(next);
    try {
      const off = await runWorkload(w, false);
      const on = await runWorkload(w, true);
      w.requests.forEach((r, j) => {
        const want = toyGeneration(r.prompt, r.maxTokens, r.seed, w.shape.vocabSize!);
        const a = off.results[j], b = on.results[j];
        if (a.reason !== "cancelled") assertEquals(a.got, want, `request ${j}, off`);
        if (b.reason === "cancelled") {
          assertEquals(b.got, want.slice(0, b.got.length), `request ${j}: cancelled, not a prefix`);
        } else {
          assertEquals(b.reason, "length", b.error);
          assertEquals(b.got, want, `request ${j}: on`);
          if (a.reason !== "cancelled") assertEquals(b.got, a.got);
        }
      });
      for (const { stats } of [off, on]) {
        assertEquals(stats.kvBlocksUsed, 0, "device blocks left held");
        assertEquals(stats.hostBlocksUsed, 0, "host blocks left held");
        assertEquals(stats.running + stats.waiting + stats.paused, 0);
      }
      if (w.prefixCache) {
        assertEquals(on.stats.kvBlocksCached, on.stats.prefix!.deviceBlocks);
        assertEquals(on.stats.hostBlocksCached, on.stats.prefix!.hostBlocks);
      } else assertEquals(on.stats.kvBlocksCached, 0);
      assertEquals(off.stats.layerwiseAdmissions, undefined);
      layerwise += on.stats.layerwiseAdmissions!;
      splits += on.stats.prefillSplits!;
      afterLayer += on.stats.offload!.blocksOutAfterLayer;
      prefetched += on.stats.offload!.blocksPrefetched;
    } catch (err) {
      throw new Error(`workload ${i}: ${(err as Error).message}\n${JSON.stringify(w)}`);
    }
  }
  // The mechanism must have been exercised, or this proves nothing about it.
  // Every admission is split; the Eq. 5 forecast holds back many that would have overcommitted.
  assert(splits > 1000, `only ${splits} splits`);
  assert(layerwise > 30, `only ${layerwise} layer-wise admissions`);
  assert(afterLayer > 100, `only ${afterLayer} blocks copied out after their layer`);
  assert(prefetched > 1000, `only ${prefetched} blocks prefetched`);
});
