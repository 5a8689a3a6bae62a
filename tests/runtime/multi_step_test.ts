// Multi-step decode over a real engine on a generated model: a runtime that runs decode groups
// (--decode-steps 8) gives every request the tokens one step per submission gives, greedy and
// seeded, with max_tokens and stop ids reached inside a group, under preemption, with paced
// readers; a request cancelled while its group runs gets nothing after the cancel and frees every
// block. Each test checks that groups did run (else it would compare single steps with themselves).

import { Engine, type StepEngine } from "../../engine/engine.ts";
import { writeTinyModel } from "../../engine/sources/tiny_model.ts";
import type { PolicyName } from "../../runtime/policy/index.ts";
import { Runtime, type SubmitParams } from "../../runtime/service.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { testGpu } from "../helpers/gpu.ts";
import { rng } from "../helpers/random.ts";

const SPEC = {
  hiddenSize: 96,
  intermediateSize: 200,
  numLayers: 2,
  numHeads: 6,
  numKvHeads: 2,
  tied: true,
  dtype: "BF16",
  seed: 7,
} as const;

const MAX_SLOTS = 8;
const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };

interface Setup {
  gpuKvMb?: number;
  policy?: PolicyName;
}

/**
 * Runtimes over one engine, one at a time: `open(steps)` closes the last one (its steps still in
 * flight come back first) and makes one with that many decode steps per group.
 */
interface Runtimes {
  open(decodeSteps: number): Promise<Runtime>;
  /** Decode groups the engine has run, and their steps. */
  readonly groups: { count: number; steps: number };
  vocab: number;
}

async function withRuntimes(fn: (r: Runtimes) => Promise<void>, setup: Setup = {}) {
  const dir = await Deno.makeTempDir({ prefix: "sluice-multistep-" });
  await writeTinyModel(dir, SPEC);
  const engine = await Engine.load({
    modelDir: dir,
    gpu: await testGpu(),
    gpuKvMb: setup.gpuKvMb ?? 8,
    skipWarmUp: true,
    maxSlots: MAX_SLOTS,
    maxRows: 32,
    maxDecodeSteps: 8,
  });
  const groups = { count: 0, steps: 0 };
  // Each runtime closes its view of the engine, not the engine.
  const shared: StepEngine = {
    info: engine.info,
    step(plan) {
      if (plan.group) groups.count++, groups.steps += plan.group.steps;
      return engine.step(plan);
    },
    close: () => Promise.resolve(),
  };
  const opened: Runtime[] = [];
  try {
    await fn({
      async open(decodeSteps) {
        for (const r of opened.splice(0)) await r.close();
        const runtime = new Runtime(shared, {
          policy: setup.policy ?? "fcfs",
          maxQueue: 1000,
          maxTokensLimit: 100_000,
          eosIds: [],
          decodeSteps,
          // Groups as long as the steps allow: the group's time bound is the fake engine tests'.
          decodeGroupMs: 1e9,
        });
        opened.push(runtime);
        return runtime;
      },
      groups,
      vocab: engine.info.vocabSize,
    });
  } finally {
    for (const r of opened) await r.close();
    await engine.close();
    await Deno.remove(dir, { recursive: true });
  }
}

function randomIds(seed: number, n: number, vocab: number): number[] {
  const next = rng(seed);
  return Array.from({ length: n }, () => Math.floor(next() * vocab));
}

async function collect(runtime: Runtime, req: SubmitParams): Promise<number[]> {
  const handle = runtime.submit(req);
  const ids: number[] = [];
  for await (const ev of handle.tokens) ids.push(ev.id);
  await handle.done;
  return ids;
}

/** All at once on a fresh runtime with `steps` decode steps per group; closed after. */
async function together(r: Runtimes, steps: number, reqs: SubmitParams[]): Promise<number[][]> {
  const runtime = await r.open(steps);
  const out = await Promise.all(reqs.map((q) => collect(runtime, q)));
  assertEquals(runtime.stats().kvBlocksUsed, 0);
  return out;
}

Deno.test("multi-step: mixed lengths, max_tokens and stop ids inside groups, greedy and seeded: the tokens of one step per submission", async () => {
  await withRuntimes(async (r) => {
    for (const seeded of [false, true]) {
      const reqs = [3, 17, 40, 9, 26, 5].map((len, i) => ({
        ids: randomIds(10 + i, len, r.vocab),
        maxTokens: [5, 11, 19, 8, 13, 23][i],
        sampling: seeded ? { temperature: 1.1, topK: 0, topP: 0.95, seed: 50 + i } : greedy,
        stopIds: [] as number[],
      }));
      const single = await together(r, 1, reqs);
      assertEquals(r.groups.count, 0);
      const grouped = await together(r, 8, reqs);
      assert(r.groups.count > 0, "no decode group ran");
      assertEquals(grouped, single);
      // Stop ids reached mid-stream: each request stops at its fourth token's id.
      const stopping = reqs.map((q, i) => ({
        ...q,
        stopIds: [single[i][Math.min(3, single[i].length - 1)]],
      }));
      const singleStop = await together(r, 1, stopping);
      const groupedStop = await together(r, 8, stopping);
      assertEquals(groupedStop, singleStop);
      assert(
        singleStop.some((ids, i) => ids.length < reqs[i].maxTokens),
        "no request stopped on its stop id",
      );
      r.groups.count = 0;
    }
  });
});

Deno.test("multi-step: requests with penalties and logit bias (counted on the GPU step by step) get the tokens of one step per submission", async () => {
  await withRuntimes(async (r) => {
    const reqs = [4, 15, 9].map((len, i) => ({
      ids: randomIds(200 + i, len, r.vocab),
      maxTokens: 18,
      sampling: {
        ...greedy,
        frequencyPenalty: 0.8 * i,
        presencePenalty: 0.5,
        repetitionPenalty: 1 + 0.2 * i,
        logitBias: [[7, 3], [11, -100]] as [number, number][],
      },
      stopIds: [] as number[],
    }));
    const single = await together(r, 1, reqs);
    const grouped = await together(r, 8, reqs);
    assertEquals(grouped, single);
    assert(r.groups.count > 0, "no decode group ran");
  });
});

Deno.test("multi-step: under a KV budget that forces preemption, every request gets the tokens one step per submission gives", async () => {
  // 40 blocks of 16 positions over 2 layers for 8 requests of up to 60 + 40 positions.
  const headDim = SPEC.hiddenSize / SPEC.numHeads;
  const perBlock = 2 * 16 * SPEC.numKvHeads * headDim * 2;
  const table = SPEC.numLayers * MAX_SLOTS * Math.ceil(2048 / 16) * 4;
  await withRuntimes(async (r) => {
    const reqs = [30, 12, 45, 7, 26, 60, 3, 18].map((len, i) => ({
      ids: randomIds(300 + i, len, r.vocab),
      maxTokens: 40,
      sampling: i % 2 ? greedy : { temperature: 0.9, topK: 0, topP: 0.9, seed: 311 + i },
      stopIds: [] as number[],
    }));
    const alone: number[][] = [];
    const single = await r.open(1);
    for (const q of reqs) alone.push(await collect(single, q));
    const runtime = await r.open(8);
    const out = await Promise.all(reqs.map((q) => collect(runtime, q)));
    assertEquals(out, alone);
    const stats = runtime.stats();
    assert(stats.preemptions >= 2, `only ${stats.preemptions} preemptions`);
    assert(r.groups.count > 0, "no decode group ran");
    assertEquals(stats.kvBlocksUsed, 0);
  }, { gpuKvMb: (table + 40 * perBlock) / 2 ** 20 });
});

Deno.test("multi-step: a request cancelled while its group runs gets nothing after the cancel, and every block is freed", async () => {
  await withRuntimes(async (r) => {
    const reqs = [5, 22, 13, 31].map((len, i) => ({
      ids: randomIds(70 + i, len, r.vocab),
      maxTokens: 60,
      sampling: greedy,
      stopIds: [] as number[],
    }));
    const full = await together(r, 1, reqs);
    const runtime = await r.open(8);
    const got = await Promise.all(reqs.map(async (q, i) => {
      const ctrl = new AbortController();
      const handle = runtime.submit({ ...q, signal: ctrl.signal });
      const ids: number[] = [];
      let afterCancel = 0;
      for await (const ev of handle.tokens) {
        if (ctrl.signal.aborted) afterCancel++;
        ids.push(ev.id);
        if (ids.length === 3 + 5 * i) ctrl.abort();
      }
      assertEquals((await handle.done).reason, "cancelled");
      assertEquals(afterCancel, 0, `request ${i} got tokens after its cancel`);
      return ids;
    }));
    got.forEach((ids, i) => assertEquals(ids, full[i].slice(0, 3 + 5 * i)));
    assert(r.groups.count > 0, "no decode group ran");
    // Blocks are released at the next step boundary: one more request gets there.
    await collect(runtime, { ids: [1, 2, 3], maxTokens: 2, sampling: greedy, stopIds: [] });
    const s = runtime.stats();
    assertEquals([s.kvBlocksUsed, s.running + s.waiting + s.paused], [0, 0]);
  });
});

Deno.test("multi-step: paced readers (reading_rate) under tokenflow get the tokens unpaced single steps give, at their rate", async () => {
  await withRuntimes(async (r) => {
    const rate = 40;
    const reqs = [6, 19, 11].map((len, i) => ({
      ids: randomIds(90 + i, len, r.vocab),
      maxTokens: 20,
      sampling: greedy,
      stopIds: [] as number[],
    }));
    const unpaced = await together(r, 1, reqs);
    const runtime = await r.open(8);
    const timed = await Promise.all(reqs.map(async (q) => {
      const handle = runtime.submit({ ...q, readingRate: rate });
      const ids: number[] = [];
      const at: number[] = [];
      for await (const ev of handle.tokens) ids.push(ev.id), at.push(performance.now());
      return { ids, spanMs: at[at.length - 1] - at[0] };
    }));
    assertEquals(timed.map((t) => t.ids), unpaced);
    for (const t of timed) {
      // n tokens at `rate` per second take (n - 1) / rate seconds at least (5% slack for timers).
      const least = ((t.ids.length - 1) / rate) * 1000 * 0.95;
      assert(t.spanMs >= least, `tokens came in ${t.spanMs} ms, faster than ${rate}/s allows`);
    }
    assert(r.groups.count > 0, "no decode group ran");
  }, { policy: "tokenflow" });
});
