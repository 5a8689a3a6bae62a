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
import { costModelWithLayer } from "../helpers/cost_models.ts";
import { sumsOf } from "../../engine/kv/cost_model.ts";

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

Deno.test("rule: when the running requests fit at no r one step's rows allow, b falls below them: the newest is preempted", () => {
  // 384 blocks hold three of the four whole (128 each); uncaching enough for the fourth would take
  // more rows than the step has.
  const i = input({ budget: 4 * 8 * 12, maxRows: 4 + 4 * 8 });
  const d = chooseUncached(i);
  assertEquals([d.batch, d.ratio, d.uncached], [3, 0, [0, 0, 0, 0]]);
  // Not even one fits: nothing is uncached, and preemption makes room.
  const none = chooseUncached(input({ budget: 10, maxRows: 4 + 4 * 8 }));
  assertEquals([none.batch, none.ratio], [4, 0]);
});

Deno.test("rule: when keeping every running request breaks the SLO, b falls to the largest batch that meets it (eq. 1, b ≤ B)", () => {
  // Memory for three whole requests; the fourth fits with 20 positions of each uncached (84 rows:
  // 10.84 ms at 10 ms + 10 µs a row), which b/T prefers (4 / 10.84 > 3 / 10.03) unless the SLO
  // (10.5 ms) rules it out.
  const stepMs = (rows: number) => 10 + 0.01 * rows;
  const i = input({ budget: 4 * 8 * 12, stepMs, sloMs: 10.5 });
  const d = chooseUncached(i);
  assertEquals([d.batch, d.ratio, d.uncached], [3, 0, [0, 0, 0, 0]]);
  const loose = chooseUncached({ ...i, sloMs: 1000 });
  assert(loose.batch === 4 && loose.ratio > 0, JSON.stringify(loose));
});

Deno.test("rule: b/T decides below the running batch too: a request whose room costs more recompute than it adds is preempted", () => {
  // Rows cost most of a step: keeping the fourth (84 rows, 9.4 ms) gives 4 / 9.4 < 3 / 1.3.
  const d = chooseUncached(input({ budget: 4 * 8 * 12, stepMs: (rows) => 1 + 0.1 * rows }));
  assertEquals([d.batch, d.ratio], [3, 0]);
});

Deno.test("rule: T has eq. 2/3's context terms, in rows of 24h²L: (s_i + 1 + (s_i·r)²) / 6h", () => {
  const stepMs = (rows: number) => rows;
  // No pressure: four decode rows, and 4 × 65 context positions over 6h = 12.
  const calm = chooseUncached(input({ stepMs, hidden: 2 }));
  assertEquals(calm.cost, 4 + (4 * 65) / 12);
  assertEquals(chooseUncached(input({ stepMs })).cost, 4, "no h: no context term");
  // Pressure: the recomputed prefixes add their rows and the square of their length (eq. 2).
  // A fixed cost per step makes the fifth request worth its recompute.
  const i = input({ stepMs: (rows) => 1000 + rows, hidden: 64, waiting: [32] });
  const d = chooseUncached(i);
  const u = d.uncached.reduce((a, b) => a + b, 0), u2 = d.uncached.reduce((a, b) => a + b * b, 0);
  assert(u > 0 && d.batch === 5, JSON.stringify(d));
  assertEquals(d.cost, 1000 + d.batch + u + (4 * 65 + u2) / 384);
});

Deno.test("rule: the SLO check counts WT_max, the admitted requests' prefill rows in the step (eq. 1)", () => {
  // Room for a fifth request without uncaching: T(5, 0) = 1.005 ms, its 32 prefill rows 0.032.
  const stepMs = (rows: number) => 1 + 0.001 * rows;
  const roomy = { waiting: [32], budget: 4 * 8 * 16 + 8 * 8, stepMs };
  const fits = chooseUncached(input({ ...roomy, sloMs: 1.04 }));
  assertEquals(fits.batch, 5);
  assert(Math.abs(fits.waitMs - 0.032) < 1e-9, `${fits.waitMs}`);
  // T alone would fit 1.02; with the wait it does not, so the queue's head is not batched.
  const tight = chooseUncached(input({ ...roomy, sloMs: 1.02 }));
  assertEquals([tight.batch, tight.waitMs], [4, 0]);
  // TPOT is a mean over a request's output: spread over 4 tokens the stall fits again.
  const spread = chooseUncached(input({ ...roomy, sloMs: 1.02, outputTokens: 4 }));
  assertEquals(spread.batch, 5);
  assert(Math.abs(spread.waitMs - 0.008) < 1e-9, `${spread.waitMs}`);
});

Deno.test("rule: when no batch meets the SLO, the running ones keep the least uncached share their memory needs", () => {
  // Steps cost 10 ms against a 5 ms SLO; the KV fits whole: nothing is left uncached.
  const d = chooseUncached(input({ stepMs: (rows) => 10 + rows, sloMs: 5, waiting: [32] }));
  assertEquals([d.batch, d.ratio, d.uncached], [4, 0, [0, 0, 0, 0]]);
  // Short of memory too: only what memory needs, not what one step's rows allow.
  const short = input({ stepMs: (rows) => 10 + rows, sloMs: 5, budget: 4 * 8 * 15 });
  const s = chooseUncached(short);
  // Two blocks each free 7 × 2 ≥ the 8 blocks each is short; one step's rows would allow 60.
  assertEquals(s.uncached, [8, 8, 8, 8]);
  assert(blocksHeld(short, s) <= short.budget);
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

/** A step of 4 layers predicted at 1 + 0.05 ms a row each: 4.2 ms for one decode row, and 3.2 ms
 * more for a 16-token prompt's prefill rows in the same step (spread over 12 output tokens: 0.27
 * ms a token). Heavy fit sums keep it there. */
const PRICED = costModelWithLayer(1, 0.05, {
  roundTripMs: 0,
  layerFit: sumsOf([[1, 1.05], [16, 1.8]], 1e9),
});

Deno.test("the rule's batch size b bounds admission: a request whose prefill would break the running one's TBT SLO waits; same tokens", async () => {
  const shape: FakeEngineShape = { ...SHAPE, blocksPerArena: [400], costModel: PRICED };
  const run = async (tokenCache: boolean) => {
    const engine = new RecordingEngine(shape);
    const runtime = new Runtime(engine, {
      policy: "fcfs",
      tokenCache,
      maxQueue: 10,
      maxTokensLimit: 100,
      eosIds: [],
    });
    const slo = { tbtMs: 4.5 };
    const first = runtime.submit({ ids: PROMPTS[0], maxTokens: 12, sampling: greedy(0), slo });
    const tokens: number[][] = [[], []];
    let second: Promise<void> | null = null;
    for await (const ev of first.tokens) {
      tokens[0].push(ev.id);
      if (second) continue;
      // Submitted once the first decodes: T(2) + WT = 4.4 + 3.2 / 12 ms > 4.5; T(1) = 4.2 fits.
      const h = runtime.submit({ ids: PROMPTS[2], maxTokens: 12, sampling: greedy(2), slo });
      second = (async () => {
        for await (const e of h.tokens) tokens[1].push(e.id);
      })();
    }
    await second;
    await runtime.close();
    return { tokens, together: Math.max(...engine.plans.map((p) => p.samples.length)) };
  };
  const off = await run(false), on = await run(true);
  const want = [0, 2].map((i) => toyGeneration(PROMPTS[i], 12, i, SHAPE.vocabSize!));
  assertEquals(off.tokens, want);
  assertEquals(on.tokens, want, "greedy tokens differ with token-wise caching");
  assertEquals(off.together, 2, "without the flag the second joins the first");
  assertEquals(on.together, 1, "with it, b = 1 until the first ends");
});

Deno.test("--token-cache with decode groups: groups run while every running request's KV is whole, never while one recomputes; same tokens", async () => {
  const slow = costModelWithLayer(15, 0, {
    roundTripMs: 0,
    layerFit: sumsOf([[1, 15], [16, 15]], 1e9),
  });
  const run = async (blocks: number, tokenCache: boolean) => {
    const engine = new RecordingEngine({
      ...SHAPE,
      blocksPerArena: [blocks],
      maxDecodeSteps: 8,
      costModel: slow,
    });
    const runtime = new Runtime(engine, {
      policy: "fcfs",
      tokenCache,
      maxQueue: 10,
      maxTokensLimit: 100,
      eosIds: [],
      decodeSteps: 8,
      decodeGroupMs: 200,
    });
    const tokens = await Promise.all(PROMPTS.map(async (ids, i) => {
      const got: number[] = [];
      for await (const ev of runtime.submit({ ids, maxTokens: 12, sampling: greedy(i) }).tokens) {
        got.push(ev.id);
      }
      return got;
    }));
    const stats = runtime.stats();
    await runtime.close();
    return { tokens, stats, groups: engine.plans.filter((p) => (p.group?.steps ?? 1) > 1).length };
  };
  const want = PROMPTS.map((ids, i) => toyGeneration(ids, 12, i, SHAPE.vocabSize!));
  // Room for all three: nothing is uncached, and groups run as they do without the flag.
  const roomy = await run(400, true);
  assertEquals(roomy.tokens, want);
  assert(roomy.groups > 0, "no group ran with the flag on and no memory pressure");
  assertEquals(roomy.stats.tokenCache!.uncachings, 0);
  // Under pressure some requests recompute their oldest KV: a group then would read scratch blocks
  // the last layer overwrote (the fake engine reads KV through the tables), so tokens would differ.
  const pressed = await run(80, true);
  assertEquals(pressed.tokens, want, "greedy tokens differ with groups and token-wise caching");
  assert(pressed.stats.tokenCache!.uncachings > 0, JSON.stringify(pressed.stats.tokenCache));
});
