// eLLM's token-wise caching (runtime/token_cache.ts, runtime/token_cached.ts): the rule that picks
// the batch size and the uncached ratio, checked against the paper's constraints; and the
// mechanism on a fake engine, whose toy model reads every position's KV through the block tables,
// layer by layer: running requests keep decoding with their oldest KV in scratch blocks shared by
// every layer, recomputed in the same steps as other requests' decode rows, with exactly the
// tokens they get without it, and no block left once they end.

import { FakeEngine, toyGeneration } from "../../sim/fake_engine.ts";
import type { FakeEngineShape } from "../../sim/fake_engine.ts";
import type { StepPlan } from "../../engine/engine.ts";
import { Runtime } from "../../runtime/service.ts";
import { chooseUncached, type TokenCacheInput } from "../../runtime/token_cache.ts";
import { presetProblems } from "../../runtime/policy/index.ts";
import { assert, assertEquals, assertThrows } from "../helpers/testing.ts";
import { greedy } from "../helpers/requests.ts";

// ---- the rule ----

/** Four running requests of 64 positions, 8 layers, blocks of 4: 16 blocks each per layer. */
function input(over: Partial<TokenCacheInput> = {}): TokenCacheInput {
  return {
    running: Array.from({ length: 4 }, () => ({ tokens: 64, maxUncached: 60 })),
    waiting: [],
    budget: 4 * 8 * 16,
    numLayers: 8,
    blockSize: 4,
    maxRows: 256,
    stepMs: () => null,
    sloMs: null,
    ...over,
  };
}

/** Blocks the decision's batch holds: cached KV per layer, one scratch copy of the uncached. */
function blocksHeld(i: TokenCacheInput, d: { batch: number; uncached: number[] }): number {
  const B = i.blockSize, L = i.numLayers;
  let n = 0;
  i.running.forEach((c, k) => {
    n += L * (Math.ceil(c.tokens / B) - d.uncached[k] / B) + d.uncached[k] / B;
  });
  for (let j = 0; j < d.batch - i.running.length; j++) n += L * Math.ceil(i.waiting[j] / B);
  return n;
}

Deno.test("rule: with no memory pressure nothing is left uncached and the whole queue is batched", () => {
  const i = input({ waiting: [32, 32], budget: 4 * 8 * 16 + 2 * 8 * 8 });
  const d = chooseUncached(i);
  assertEquals([d.batch, d.ratio, d.uncached], [6, 0, [0, 0, 0, 0]]);
});

Deno.test("rule: more requests waiting for memory → a bigger batch with more of its KV uncached", () => {
  let lastRatio = -1;
  let lastBatch = 0;
  for (const queued of [0, 1, 2, 3, 4]) {
    const i = input({ waiting: new Array(queued).fill(32) });
    const d = chooseUncached(i);
    // The memory constraint (eLLM eq. 1): cached KV of the batch, plus the scratch, fits.
    assert(blocksHeld(i, d) <= i.budget, `${queued} queued: ${blocksHeld(i, d)} > ${i.budget}`);
    assert(d.ratio >= 0 && d.ratio <= 1);
    assert(d.batch > lastBatch, `${queued} queued: batch ${d.batch}`);
    assert(d.ratio > lastRatio || (queued === 0 && d.ratio === 0), `${queued}: r ${d.ratio}`);
    // r_min(b): a grid step less would not fit.
    if (d.ratio > 0) {
      const less = chooseUncached({ ...i, waiting: i.waiting.slice(0, d.batch - 4) });
      assertEquals(less.ratio, d.ratio);
    }
    lastRatio = d.ratio;
    lastBatch = d.batch;
  }
});

Deno.test("rule: each request keeps its newest block, and the recompute rows fit one step", () => {
  const i = input({
    waiting: new Array(8).fill(32),
    running: Array.from({ length: 4 }, () => ({ tokens: 64, maxUncached: 24 })),
    maxRows: 80,
  });
  const d = chooseUncached(i);
  assert(d.uncached.every((u) => u <= 24 && u % 4 === 0), `${d.uncached}`);
  const rows = d.batch + d.uncached.reduce((a, b) => a + b, 0);
  assert(rows <= 80, `${rows} rows`);
  assert(blocksHeld(i, d) <= i.budget);
});

Deno.test("rule: the TBT SLO bounds the batch and the recompute it may take (eLLM eq. 1)", () => {
  // 1 ms per step plus 1 µs per row: a fifth request is worth its recompute, if the SLO allows it.
  const stepMs = (rows: number) => 1 + 0.001 * rows;
  const loose = chooseUncached(input({ waiting: new Array(4).fill(32), stepMs, sloMs: 100 }));
  const tight = chooseUncached(input({ waiting: new Array(4).fill(32), stepMs, sloMs: 1.01 }));
  assert(loose.batch > 4 && loose.ratio > 0, JSON.stringify(loose));
  assert(tight.cost <= 1.01, JSON.stringify(tight));
  assert(tight.batch < loose.batch, `${tight.batch} vs ${loose.batch}`);
});

Deno.test("rule: throughput b/T decides: a batch whose recompute costs more than it adds is not taken", () => {
  // Each step costs mostly its rows: adding one short request at the price of recomputing half
  // of four long ones lowers b/T, so the rule stays at the running four.
  const stepMs = (rows: number) => 0.1 + rows;
  const d = chooseUncached(input({ waiting: [32], stepMs }));
  assertEquals([d.batch, d.ratio], [4, 0]);
});

Deno.test("rule: when even the running requests do not fit, it frees what one step's rows allow", () => {
  const i = input({ budget: 4 * 8 * 12, maxRows: 4 + 4 * 8 });
  const d = chooseUncached(i);
  assertEquals(d.batch, 4);
  assert(d.uncached.every((u) => u === 8), `${d.uncached}`);
});

Deno.test("--token-cache is refused where its requests' layers live on the host", () => {
  const flags = presetProblems("fcfs", { tokenCache: true, offload: "uniform" }, {
    hostTier: true,
  }).map((p) => p.flag);
  assert(flags.includes("token-cache"), `${flags}`);
  assertEquals(presetProblems("fcfs", { tokenCache: true }, { hostTier: false }), []);
});

// ---- the mechanism, on a fake engine ----

/** A fake engine that keeps every step's plan. */
class RecordingEngine extends FakeEngine {
  readonly plans: StepPlan[] = [];
  override step(plan: StepPlan) {
    this.plans.push(structuredClone(plan));
    return super.step(plan);
  }
}

const SHAPE: FakeEngineShape = {
  numLayers: 4,
  blockSize: 2,
  // 20 blocks per layer: two requests of 24 + 12 positions fill it; a third must wait.
  blocksPerArena: [80],
  maxSlots: 4,
  maxRows: 24,
  maxBlocksPerSeq: 20,
  vocabSize: 50,
};

const PROMPTS = [
  Array.from({ length: 20 }, (_, i) => (i * 7) % 50),
  Array.from({ length: 18 }, (_, i) => (i * 11 + 3) % 50),
  Array.from({ length: 16 }, (_, i) => (i * 13 + 5) % 50),
];

async function serve(tokenCache: boolean) {
  const engine = new RecordingEngine(SHAPE);
  const runtime = new Runtime(engine, {
    policy: "fcfs",
    tokenCache,
    maxQueue: 10,
    maxTokensLimit: 100,
    eosIds: [],
  });
  const handles = PROMPTS.map((ids, i) =>
    runtime.submit({ ids, maxTokens: 12, sampling: greedy(i) })
  );
  const tokens = await Promise.all(handles.map(async (h) => {
    const got: number[] = [];
    for await (const ev of h.tokens) got.push(ev.id);
    await h.done;
    return got;
  }));
  for (let i = 0; i < 50 && runtime.stats().kvBlocksUsed > 0; i++) {
    await new Promise((r) => setTimeout(r, 0));
  }
  const stats = runtime.stats();
  await runtime.close();
  return { tokens, stats, plans: engine.plans };
}

Deno.test("token-wise caching: running requests decode with their oldest KV uncached, recomputed beside others' decode rows; same tokens, every block freed", async () => {
  const off = await serve(false);
  const on = await serve(true);
  const want = PROMPTS.map((ids, i) => toyGeneration(ids, 12, i, SHAPE.vocabSize!));
  assertEquals(off.tokens, want);
  assertEquals(on.tokens, want, "greedy tokens differ with token-wise caching");
  for (const { stats } of [off, on]) {
    assertEquals([stats.kvBlocksUsed, stats.running, stats.waiting, stats.paused], [0, 0, 0, 0]);
  }
  const tc = on.stats.tokenCache!;
  assert(tc.uncachings > 0 && tc.recomputeRows > 0, JSON.stringify(tc));
  assertEquals(off.stats.tokenCache, undefined);
  // A step where one slot recomputes its oldest positions (from position 0) ahead of its own
  // decode row, while another slot decodes in the same step.
  const mixed = on.plans.filter((plan) => {
    const decoding = new Set(plan.rows.filter((r) => r.token === null).map((r) => r.slot));
    const recomputing = plan.rows.filter((r) => r.pos === 0 && decoding.has(r.slot));
    return recomputing.length > 0 && decoding.size >= 2;
  });
  assert(mixed.length > 0, "no step carried recompute rows beside another request's decode row");
  // Token-wise caching let the third request in without preempting anyone for it.
  assert(on.stats.preemptions <= off.stats.preemptions, `${on.stats.preemptions} preemptions`);
});

Deno.test("--token-cache is refused at start-up where it would do nothing: layers in several arenas, or one layer", () => {
  const open = (shape: FakeEngineShape) => () =>
    new Runtime(new FakeEngine(shape), {
      policy: "fcfs",
      tokenCache: true,
      maxQueue: 1,
      maxTokensLimit: 8,
      eosIds: [],
    });
  assertThrows(
    open({ numLayers: 2, blocksPerArena: [16, 16], layerArena: [0, 1] }),
    RangeError,
    "--token-cache",
  );
  assertThrows(open({ numLayers: 1 }), RangeError, "--token-cache");
});
