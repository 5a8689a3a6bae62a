// `--sched slo` (LayerKV's SLO-aware admission) on the fake engine, with a fake cost model and a
// fake clock: a step takes 10 ms plus 1 ms per token row. First the gate on a worked example, then
// that without a cost model it is fcfs step for step, then random arrivals, readers, SLOs and
// cancels in fake time: every request ends with exactly its tokens, and no block is left held.

import { FakeEngine, type FakeEngineShape, toyGeneration } from "../../../sim/fake_engine.ts";
import { assert, assertEquals, useFakeTime } from "../../helpers/testing.ts";
import { rng } from "../../helpers/random.ts";
import { greedy, stage, testRequest } from "../../helpers/requests.ts";
import type { CostModel, StepPlan } from "../../../engine/engine.ts";
import { BlockPool } from "../../../runtime/kv/block_pool.ts";
import { predictStepMs, sumsOf } from "../../../engine/kv/cost_model.ts";
import { Request, type RequestSlo } from "../../../runtime/request/request.ts";
import { Scheduler } from "../../../runtime/scheduler.ts";
import { Runtime } from "../../../runtime/service.ts";
import { fcfsPolicy } from "../../../runtime/policy/fcfs.ts";
import { sloPolicy } from "../../../runtime/policy/slo.ts";
import type { PolicyContext, SchedulingPolicy } from "../../../runtime/policy/policy.ts";

const line = (fixedMs: number, perUnitMs: number) => ({ fixedMs, perUnitMs });

/** 10 ms a step plus 1 ms per token row; sampling and copies free. */
const COSTS: CostModel = {
  numLayers: 1,
  roundTripMs: 0,
  layer: line(10, 1),
  sample: line(0, 0),
  hostToDevice: line(0, 0),
  deviceToHost: line(0, 0),
  overlap: 0,
  layerFit: sumsOf([[1, 11], [100, 110]], 8),
};

const stepMs = (plan: StepPlan) =>
  predictStepMs(COSTS, { rows: plan.rows.length, samples: plan.samples.length });

/** A scheduler over a fake engine, stepped by hand; the clock moves by each step's predicted ms. */
class Bench {
  now = 0;
  readonly engine: FakeEngine;
  readonly pool: BlockPool;
  readonly scheduler: Scheduler;
  private nextId = 1;

  constructor(policy: SchedulingPolicy, shape: FakeEngineShape, costs: CostModel | undefined) {
    this.engine = new FakeEngine(shape);
    this.scheduler = new Scheduler({
      kv: { shape: { ...this.engine.info, hostBlocks: 0 } },
      limits: this.engine.info,
      policy,
      time: { now: () => this.now, costModel: () => costs },
    });
    this.pool = this.scheduler.space.pool;
  }

  submit(prompt: number[], maxTokens: number, slo: RequestSlo = {}, readingRate = 0): Request {
    const req = testRequest(this.nextId++, { ids: prompt, maxTokens, readingRate, slo }, this.now);
    this.scheduler.submit(req);
    return req;
  }

  /** One step; its plan (null when nothing could run). */
  async step(): Promise<StepPlan | null> {
    const built = this.scheduler.schedule();
    if (!built) return null;
    const records = await this.engine.step(built.plan);
    this.now += stepMs(built.plan);
    this.scheduler.deliver(built, records);
    return built.plan;
  }
}

const SHAPE: FakeEngineShape = {
  numLayers: 2,
  blockSize: 4,
  blocksPerArena: [256],
  maxSlots: 4,
  maxRows: 16,
  maxBlocksPerSeq: 64,
};

const prompt = (n: number, from = 1) => Array.from({ length: n }, (_, i) => (from + i) % 1000);

// Two decodes at 100 tokens/s (a token every 10 ms) with a 20 ms TBT SLO; a decode step is 12 ms.
// The 64-token prompt runs 14 rows a step beside them: four 26 ms steps and a 20 ms one. A reader
// with b tokens buffered gets step j's token 26j - 10(b + j - 2) ms after the one before it, so
// the fourth step keeps it within 20 ms only from b = 7 tokens (70 ms of playout) on.
Deno.test("slo: two decodes with empty buffers hold a long prefill back until they hold enough playout", async () => {
  const bench = new Bench(sloPolicy, SHAPE, COSTS);
  const decodes = [1, 2].map((i) => bench.submit(prompt(3, 10 * i), 100, { tbtMs: 20 }, 100));
  await bench.step(); // both prefill (nothing decodes yet: nothing to protect) and sample
  assert(decodes.every((r) => r.state === "decoding"));
  const long = bench.submit(prompt(64, 500), 4);
  const buffered = () => Math.min(...decodes.map((r) => r.buffer.occupancy().tokens));
  const heldAt: number[] = [];
  while (long.state === "waiting") {
    heldAt.push(buffered());
    const plan = await bench.step();
    assert(plan !== null);
    if (long.state === "waiting") assertEquals(plan.rows.length, 2, "decodes alone");
  }
  assertEquals(heldAt, [1, 2, 3, 4, 5, 6, 7].slice(0, heldAt.length));
  assertEquals(heldAt.at(-1), 7, "admitted once each buffer holds 7 tokens");
  // Its prefill then runs beside the decodes: 14 rows a step.
  const rows: number[] = [];
  while (long.state === "prefilling") rows.push((await bench.step())!.rows.length);
  assertEquals(rows, [16, 16, 16, 10]);
});

Deno.test("slo: unpaced readers bank nothing; the head is held until its TTFT SLO is due", async () => {
  const bench = new Bench(sloPolicy, SHAPE, COSTS);
  const decodes = [1, 2].map((i) => bench.submit(prompt(3, 10 * i), 100, { tbtMs: 20 }));
  await bench.step();
  const arrived = bench.now;
  // Prefill 4 × 26 + 20 = 124 ms, plus one more 12 ms decode step if it waits: due once
  // now - arrived + 136 ≥ 200, at 72 ms (6 decode steps) and not at 60.
  const head = bench.submit(prompt(64, 500), 4, { ttftMs: 200 });
  const behind = bench.submit(prompt(3, 900), 4); // no overtaking
  let admittedAt = 0;
  while (head.state === "waiting") {
    assertEquals(behind.state, "waiting");
    admittedAt = bench.now - arrived;
    await bench.step();
  }
  assertEquals(admittedAt, 72);
  assert(decodes.every((r) => r.state === "decoding"));
  // Without a TTFT SLO, the head waits for the decodes to end (unpaced: no playout to spend).
  const bench2 = new Bench(sloPolicy, SHAPE, COSTS);
  const short = [1, 2].map((i) => bench2.submit(prompt(3, 10 * i), 8, { tbtMs: 20 }));
  await bench2.step();
  const late = bench2.submit(prompt(64, 500), 4);
  while (late.state === "waiting") await bench2.step();
  assert(short.every((r) => r.finish?.reason === "length" && r.generated.length === 8));
});

Deno.test("slo: a short prefill that keeps every step within the TBT SLO is admitted at once", async () => {
  const bench = new Bench(sloPolicy, SHAPE, COSTS);
  [1, 2].map((i) => bench.submit(prompt(3, 10 * i), 100, { tbtMs: 20 }));
  await bench.step();
  // 8 rows beside 2 decodes: one 20 ms step.
  const small = bench.submit(prompt(8, 500), 4);
  await bench.step();
  assert(small.state !== "waiting");
});

Deno.test("slo: a preempted request is held only while its own buffer covers the wait", () => {
  const ctx: PolicyContext = {
    now: () => 0,
    maxSlots: 4,
    freeSlots: 1,
    maxRows: 16,
    blockSize: 4,
    freeBlocksPerLayer: 100,
    hostTier: false,
    stepMs: (rows) => 10 + rows,
    copyMs: () => null,
  };
  const running = [1, 2].map((i) =>
    stage(testRequest(i, { ids: [i], maxTokens: 100, slo: { tbtMs: 20 } }), "decoding")
  );
  const resumeWith = (buffered: number) => {
    const r = testRequest(3, {
      ids: prompt(64),
      maxTokens: 100,
      slo: { tbtMs: 30 },
      readingRate: 100,
    });
    // Its generated tokens are all in its buffer, unread.
    return stage(r, "paused", { generated: Array.from({ length: buffered }, (_, i) => i) });
  };
  // Its prefill (64 + buffered rows, 14 a step beside 2 decodes) plus one more 12 ms step against
  // its playout (10 ms a token) and 30 ms TBT: with 5 tokens it is due (141 ≥ 50 + 30), with 20
  // it can wait (168 < 200 + 30).
  assertEquals(sloPolicy.mayAdmit!(resumeWith(5), running, ctx), true);
  assertEquals(sloPolicy.mayAdmit!(resumeWith(20), running, ctx), false);
});

interface Script {
  shape: FakeEngineShape;
  /** Requests submitted before step `at`; some cancelled before step `cancelAt`. */
  requests: {
    at: number;
    prompt: number[];
    maxTokens: number;
    slo: RequestSlo;
    readingRate: number;
    cancelAt?: number;
  }[];
}

function randomScript(next: () => number): Script {
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const blockSize = int(1, 4);
  const perLayer = int(8, 24);
  const context = perLayer * blockSize;
  const numLayers = int(1, 2);
  // Room for one request at its longest: a few at once force preemption.
  const shape = {
    numLayers,
    blockSize,
    blocksPerArena: [perLayer * numLayers],
    maxSlots: int(1, 5),
    maxRows: int(4, 16),
    maxBlocksPerSeq: perLayer,
    vocabSize: 50,
  };
  const requests = Array.from({ length: int(1, 10) }, () => {
    const promptLength = int(1, Math.max(1, Math.floor(context / 2)));
    return {
      at: int(0, 30),
      prompt: Array.from({ length: promptLength }, () => int(0, 49)),
      maxTokens: int(1, Math.min(20, context - promptLength)),
      slo: { tbtMs: int(11, 30), ttftMs: next() < 0.5 ? int(20, 300) : undefined },
      readingRate: next() < 0.5 ? 0 : int(20, 200),
      cancelAt: next() < 0.2 ? int(0, 40) : undefined,
    };
  });
  return { shape, requests };
}

/** Runs a script to the end: every step's plan, and each request's tokens and finish. */
async function play(policy: SchedulingPolicy, s: Script, costs: CostModel | undefined) {
  const bench = new Bench(policy, s.shape, costs);
  const reqs: (Request | undefined)[] = [];
  const plans: string[] = [];
  for (let step = 0; step < 5000; step++) {
    s.requests.forEach((r, i) => {
      if (r.at === step) reqs[i] = bench.submit(r.prompt, r.maxTokens, r.slo, r.readingRate);
      if (r.cancelAt === step && reqs[i]) reqs[i]!.cancel();
    });
    const plan = await bench.step();
    plans.push(JSON.stringify(plan));
    if (!plan && step > 30 && !bench.scheduler.hasWork) break;
  }
  assert(!bench.scheduler.hasWork, "a request never finished");
  assertEquals(bench.pool.used, 0, "blocks left held");
  return {
    plans,
    tokens: reqs.map((r) => ({ ids: r!.generated, finish: r!.finish?.reason })),
    preemptions: bench.scheduler.preemptions,
  };
}

Deno.test("slo: without a cost model it is fcfs, step for step (500 random scripts with tight SLOs)", async () => {
  const next = rng(4242);
  let preemptions = 0;
  for (let i = 0; i < 500; i++) {
    const s = randomScript(next);
    const fcfs = await play(fcfsPolicy, s, undefined);
    const slo = await play(sloPolicy, s, undefined);
    assertEquals(slo.plans, fcfs.plans, `script ${i}: ${JSON.stringify(s)}`);
    assertEquals(slo.tokens, fcfs.tokens);
    preemptions += fcfs.preemptions;
  }
  assert(preemptions > 100, `only ${preemptions} preemptions`);
});

Deno.test("slo: with a cost model but no TBT SLO it is fcfs too", async () => {
  const next = rng(99);
  for (let i = 0; i < 200; i++) {
    const s = randomScript(next);
    for (const r of s.requests) r.slo = { ttftMs: r.slo.ttftMs };
    const fcfs = await play(fcfsPolicy, s, COSTS);
    const slo = await play(sloPolicy, s, COSTS);
    assertEquals(slo.plans, fcfs.plans, `script ${i}: ${JSON.stringify(s)}`);
  }
});

/** A fake engine whose steps take the cost model's predicted time (on the installed fake clock). */
class TimedEngine extends FakeEngine {
  private readonly timing: { ms: number };
  constructor(shape: FakeEngineShape, private readonly costs: CostModel) {
    const timing = { ms: 0 };
    super(shape, () => new Promise((r) => setTimeout(r, timing.ms)));
    this.timing = timing;
    this.info.costModel = costs;
  }
  override step(plan: StepPlan) {
    this.timing.ms = predictStepMs(this.costs, {
      rows: plan.rows.length,
      samples: plan.samples.length,
    });
    return super.step(plan);
  }
}

interface Workload {
  shape: FakeEngineShape;
  preempt: "recompute" | "swap" | "partial";
  requests: {
    arriveMs: number;
    prompt: number[];
    maxTokens: number;
    seed: number;
    stopIds: number[];
    readingRate: number;
    slo: RequestSlo;
    /** Cancel after reading this many tokens (0: at once); undefined: read to the end. */
    cancelAfter?: number;
  }[];
}

function randomWorkload(next: () => number): Workload {
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const numLayers = int(1, 3);
  const blockSize = int(1, 5);
  const perLayer = int(6, 24);
  const vocab = int(5, 60);
  const hostBlocks = next() < 0.5 ? 0 : int(1, 2 * perLayer * numLayers);
  const shape = {
    numLayers,
    blockSize,
    blocksPerArena: [perLayer * numLayers],
    maxSlots: int(1, 6),
    maxRows: int(6, 16),
    ringSize: 1, // one step at a time, so each takes its predicted time
    vocabSize: vocab,
    maxBlocksPerSeq: perLayer,
    hostBlocks,
  };
  const context = perLayer * blockSize;
  const preempt = (["recompute", "partial", "swap"] as const)[int(0, hostBlocks > 0 ? 2 : 1)];
  const requests = Array.from({ length: int(1, 10) }, () => {
    const promptLength = int(1, Math.max(1, Math.floor(context / 2)));
    const roll = next();
    return {
      arriveMs: int(0, 400),
      prompt: Array.from({ length: promptLength }, () => int(0, vocab - 1)),
      maxTokens: int(0, Math.min(24, context - promptLength)),
      seed: int(0, 1000),
      stopIds: next() < 0.3 ? [int(0, vocab - 1)] : [],
      readingRate: next() < 0.4 ? 0 : int(10, 150),
      slo: {
        tbtMs: next() < 0.8 ? int(12, 40) : undefined,
        ttftMs: next() < 0.5 ? int(30, 1000) : undefined,
      },
      cancelAfter: roll < 0.15 ? int(0, 5) : undefined,
    };
  });
  return { shape, preempt, requests };
}

/** Runs `w` in fake time under `--sched slo`; fails on a wrong token, a stuck request or a leak. */
async function runWorkload(w: Workload, clock: ReturnType<typeof useFakeTime>) {
  const engine = new TimedEngine(w.shape, COSTS);
  const runtime = new Runtime(engine, {
    policy: "slo",
    preempt: w.preempt,
    maxQueue: 100,
    maxTokensLimit: 10_000,
    eosIds: [],
  });
  const vocab = engine.info.vocabSize;
  const start = clock.now;
  const order = w.requests.map((_, i) => i).sort((a, b) =>
    w.requests[a].arriveMs - w.requests[b].arriveMs
  );
  const runs: Promise<{ got: number[]; reason: string }>[] = [];
  let ended = 0;
  for (const i of order) {
    const r = w.requests[i];
    await clock.tickAsync(Math.max(0, start + r.arriveMs - clock.now));
    const ctrl = new AbortController();
    const handle = runtime.submit({
      ids: r.prompt,
      maxTokens: r.maxTokens,
      sampling: greedy(r.seed),
      stopIds: r.stopIds,
      readingRate: r.readingRate,
      slo: r.slo,
      signal: ctrl.signal,
    });
    if (r.cancelAfter === 0) ctrl.abort();
    runs[i] = (async () => {
      const got: number[] = [];
      for await (const ev of handle.tokens) {
        got.push(ev.id);
        if (got.length === r.cancelAfter) ctrl.abort();
      }
      const finish = await handle.done;
      ended++;
      assertEquals(finish.completionTokens >= got.length, true);
      return { got, reason: finish.reason };
    })();
  }
  // No starvation: everything ends within a minute of fake time (a run takes a few seconds).
  for (let t = 0; t < 60_000 && ended < runs.length; t += 100) await clock.tickAsync(100);
  assertEquals(ended, runs.length, `stuck: ${JSON.stringify(runtime.stats())}`);
  const results = await Promise.all(runs);
  results.forEach(({ got, reason }, i) => {
    const r = w.requests[i];
    const want = toyGeneration(r.prompt, r.maxTokens, r.seed, vocab, new Set(r.stopIds));
    // A reader may cancel after generation ended (its stream was still playing): "length" then.
    if (reason === "cancelled" || got.length === r.cancelAfter) {
      assertEquals(got, want.slice(0, got.length), `request ${i}: cancelled stream not a prefix`);
    } else {
      assertEquals(got, want, `request ${i}`);
      assertEquals(reason, want.length < r.maxTokens ? "stop" : "length");
    }
  });
  await clock.tickAsync(100);
  const stats = runtime.stats();
  assertEquals(stats.kvBlocksUsed, 0, "blocks left allocated after every request ended");
  assertEquals(stats.hostBlocksUsed, 0, "host blocks left allocated");
  assertEquals(stats.running + stats.waiting + stats.paused, 0);
  const closed = runtime.close();
  await clock.tickAsync(100);
  await closed;
  return stats.preemptions;
}

Deno.test("property: slo in fake time, 1000 random workloads of arrivals, readers, SLOs and cancels: no token lost or duplicated, no starvation, no block leak", async () => {
  const next = rng(909);
  const gate = sloPolicy.mayAdmit!;
  let holds = 0, admits = 0, preemptions = 0;
  // Count the gate's answers (the policy object is shared: restored below).
  sloPolicy.mayAdmit = (req, running, ctx) => {
    const ok = gate(req, running, ctx);
    if (ok) admits++;
    else holds++;
    return ok;
  };
  const clock = useFakeTime(0);
  try {
    for (let i = 0; i < 1000; i++) {
      const w = randomWorkload(next);
      try {
        preemptions += await runWorkload(w, clock);
      } catch (err) {
        throw new Error(`workload ${i}: ${(err as Error).message}\n${JSON.stringify(w)}`);
      }
    }
  } finally {
    clock.uninstall();
    sloPolicy.mayAdmit = gate;
  }
  // The gate must both have held prefills back and let them through, or this proves nothing.
  assert(holds > 1000, `only ${holds} holds`);
  assert(admits > 1000, `only ${admits} admissions`);
  assert(preemptions > 100, `only ${preemptions} preemptions`);
});
