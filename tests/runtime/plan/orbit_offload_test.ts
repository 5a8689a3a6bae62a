// The OrbitFlow planner driving the offload executor: when it asks for a plan (once per batch, not
// again while one is being solved, at window expiry, on drift of measured steps), what it answers
// (the newest plan's distances, 0 for requests it does not know, the request to pause), and, over
// the fake engine with the real planner Worker, that `offload: "orbit"` under a device budget too
// small for the batch gives every request the tokens its prompt alone determines, offloads for
// real, leaks no block, and leaves no Worker behind on close (Deno's sanitizers would fail it).

import type { CostModel } from "../../../engine/engine.ts";
import { orbitPlan } from "../../../runtime/plan/orbit_planner.ts";
import { OrbitOffload, type PlanSource } from "../../../runtime/plan/orbit_offload.ts";
import type { Plan, PlanInput } from "../../../runtime/plan/plan_types.ts";
import type { Outcome } from "../../../runtime/plan/plan_requests.ts";
import { Request } from "../../../runtime/request/request.ts";
import type { BuiltStep } from "../../../runtime/step_builder.ts";
import { Runtime, type RuntimeOptions } from "../../../runtime/service.ts";
import { FakeEngine, toyGeneration } from "../../../sim/fake_engine.ts";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";
import { costModelWithLayer } from "../../helpers/cost_models.ts";
import { greedy, stage, testRequest } from "../../helpers/requests.ts";

const LAYERS = 4, BLOCK = 4;

const costModel = () => costModelWithLayer(2, 0.3, { roundTripMs: 1 });

/** Plans in the caller's thread, at once or when released: the Worker's behaviour, no Worker. */
class InlineSource implements PlanSource {
  abandoned = 0;
  failed = 0;
  latestSeq = 0;
  readonly asked: PlanInput[] = [];
  /** Hold each request until release() (a solve in flight). */
  hold = false;
  private seq = 0;
  private plan?: Plan;
  private held?: { seq: number; input: PlanInput };
  private readonly waiters = new Map<number, (o: Outcome) => void>();
  private readonly outcomes = new Map<number, Outcome>();

  get busy(): boolean {
    return this.held !== undefined;
  }

  request(input: PlanInput): number {
    const seq = ++this.seq;
    this.asked.push(input);
    this.held = { seq, input };
    if (!this.hold) this.release();
    return seq;
  }

  release(): void {
    const h = this.held!;
    this.held = undefined;
    const plan = orbitPlan(h.input);
    const kept = plan.feasible || plan.pause !== undefined;
    if (kept) [this.plan, this.latestSeq] = [plan, h.seq];
    const outcome = kept ? "planned" : "kept-last";
    this.outcomes.set(h.seq, outcome);
    this.waiters.get(h.seq)?.(outcome);
  }

  latest(): Plan | undefined {
    return this.plan;
  }

  settled(seq: number): Promise<Outcome> {
    const known = this.outcomes.get(seq);
    if (known) return Promise.resolve(known);
    return new Promise((resolve) => this.waiters.set(seq, resolve));
  }

  close(): void {}
}

/** A decoding request with `computed` context tokens of its `maxTokens` + 6-token prompt. */
function decoding(id: number, computed: number, maxTokens = 40): Request {
  return stage(testRequest(id, { ids: [1, 2, 3, 4, 5, 6], maxTokens }), "decoding", { computed });
}

/** A planner over a pool of `total` blocks with a 16-block region, and its inline plan source. */
function planner(
  total: number,
  opts: { window?: number; regionBlocks?: number; pauseResume?: boolean } = {},
) {
  const source = new InlineSource();
  const regionBlocks = opts.regionBlocks ?? 16;
  const orbit = new OrbitOffload({
    info: { numLayers: LAYERS, kvBlockBytes: 4096, blockSize: BLOCK },
    pool: { total, heldBy: () => 0 },
    region: { regionBlocks, regionTotal: regionBlocks },
    costs: costModel,
    window: opts.window,
    maxWindow: opts.window, // a fixed window unless a test asks for the planner's choice
    client: source,
    pauseResume: opts.pauseResume,
  });
  return { orbit, source };
}

function decodeStep(rows: number): BuiltStep {
  const r = Array.from({ length: rows }, (_, pos) => ({ slot: 0, pos, token: null }));
  return {
    plan: {
      tables: [],
      sampling: [],
      rows: r,
      samples: r.map((_, row) => ({ row })),
      wantTopLogprobs: false,
    },
    owners: [],
    landings: [],
  };
}

Deno.test("orbit offload: one plan per batch, applied from the next step; unknown requests keep all layers", async () => {
  // Three requests at 10 tokens of 46: 11 blocks a layer by the window's end, 132 blocks whole,
  // on a pool of 100 less a 40-block region.
  const { orbit, source } = planner(100, { regionBlocks: 40 });
  const batch = [decoding(1, 10), decoding(2, 10), decoding(3, 10)];
  orbit.beforeStep(batch);
  await null; // the solve's bookkeeping (a Worker's answer would come as a later message)
  assertEquals(source.asked.length, 1);
  const input = source.asked[0];
  assertEquals(input.budgetBlocks, 100);
  assertEquals(input.regionReservedBlocks, 40);
  assertEquals(input.prefetchRegionBlocks, 40);
  assertEquals(input.requests.map((r) => [r.id, r.blocksPerLayer, r.finalTokens]), [
    [1, 3, 46],
    [2, 3, 46],
    [3, 3, 46],
  ]);
  for (let i = 0; i < 5; i++) orbit.beforeStep(batch);
  assertEquals(source.asked.length, 1, "the same batch asked again");
  const distances = batch.map((r) => orbit.distanceOf(r));
  assert(distances.some((d) => d > 0), `nobody offloads: ${distances}`);
  assertEquals(orbit.distanceOf(decoding(9, 10)), 0);
  // A prefilling request is not planned; a fourth decoding one changes the batch.
  const newcomer = stage(testRequest(4, { ids: [1, 2, 3, 4, 5, 6], maxTokens: 40 }), "prefilling", {
    computed: 10,
  });
  orbit.beforeStep([...batch, newcomer]);
  assertEquals(source.asked.length, 1);
  newcomer.startDecoding();
  orbit.beforeStep([...batch, newcomer]);
  assertEquals(source.asked.length, 2);
  await null; // the settled() callbacks
  const stats = orbit.stats();
  assertEquals(stats.requested, { "no-plan": 1, batch: 1, window: 0, drift: 0 });
  assertEquals(stats.solves, 2);
  assertEquals(orbit.takeSolveTimes().length, 2);
  assertEquals(orbit.takeSolveTimes().length, 0);
  orbit.close();
});

Deno.test("orbit offload: a batch whose plan is being solved is not asked for again", () => {
  const { orbit, source } = planner(100, { regionBlocks: 40 });
  source.hold = true;
  const batch = [decoding(1, 10), decoding(2, 10), decoding(3, 10)];
  for (let i = 0; i < 4; i++) orbit.beforeStep(batch);
  assertEquals(source.asked.length, 1);
  assertEquals(orbit.distanceOf(batch[0]), 0, "no plan yet: every layer on the device");
  // Another batch meanwhile is asked for (it replaces the waiting one in the real client).
  orbit.beforeStep(batch.slice(0, 2));
  assertEquals(source.asked.length, 2);
  source.release();
  orbit.close();
});

Deno.test("orbit offload: the window's end and drift of measured steps ask for a new plan", () => {
  const batch = [decoding(1, 10), decoding(2, 10)];
  {
    const { orbit, source } = planner(100, { window: 4, regionBlocks: 40 });
    orbit.beforeStep(batch); // step 1: asks; the plan is in force from step 2
    orbit.beforeStep(batch);
    orbit.beforeStep(batch);
    assertEquals(source.asked.length, 1);
    orbit.beforeStep(batch); // step 4: the solve would run in step 5, the window's last
    assertEquals(source.asked.length, 2);
    assertEquals(orbit.stats().requested.window, 1);
    orbit.close();
  }
  {
    const { orbit, source } = planner(100, { regionBlocks: 40 });
    orbit.beforeStep(batch);
    orbit.beforeStep(batch); // installs it
    const predicted = source.latest()!.predictedStepMs;
    // Prefill steps say nothing about decode steps; a step or two alone does not re-plan.
    const prefill = decodeStep(8);
    prefill.plan.samples = [{ row: 7 }];
    for (let i = 0; i < 5; i++) orbit.observeStep(prefill, 50 * predicted);
    orbit.observeStep(decodeStep(2), 3 * predicted);
    orbit.observeStep(decodeStep(2), 3 * predicted);
    orbit.beforeStep(batch);
    assertEquals(source.asked.length, 1);
    orbit.observeStep(decodeStep(2), 3 * predicted);
    orbit.beforeStep(batch);
    assertEquals(source.asked.length, 2);
    assertEquals(orbit.stats().requested.drift, 1);
    orbit.close();
  }
});

Deno.test("orbit offload: with no plan for the whole batch, the planner names the request to pause", () => {
  // A 4-block region: nobody's layer fits it, so nobody can offload, and 26 blocks hold no one.
  const { orbit, source } = planner(30, { regionBlocks: 4 });
  const batch = [decoding(1, 20), decoding(2, 24), decoding(3, 20)];
  orbit.beforeStep(batch);
  assertEquals(orbit.pauseRequested(), 2, "the request with the most KV");
  assertEquals(orbit.stats().pauseRequested, 2);
  // The scheduler pauses it, once per plan, and admits nobody while the plan needs a pause.
  assertEquals(orbit.feasible(), false);
  assertEquals(orbit.toPause(batch).map((r) => r.id), [2]);
  assertEquals(orbit.toPause(batch), [], "the same plan's pause is acted on once");
  assertEquals(orbit.stats().pauses, 1);
  // Once it has left the batch it is no longer named (while the next plan is being solved); it
  // is not readmitted yet: nothing has completed since it paused.
  batch[1].pause();
  source.hold = true;
  orbit.beforeStep([batch[0], batch[2]]);
  assertEquals(orbit.pauseRequested(), undefined);
  assertEquals(orbit.feasible(), false, "no completion since the pause");
  orbit.close();
});

Deno.test("orbit offload: with pause-resume off (Fig. 14a's steps before it), nobody is paused and admissions go on", () => {
  // The batch above, which no plan fits in memory: the planner is told to serve all (no victim),
  // finds nothing, and every request keeps all its layers (the pool's preemption takes what runs
  // out).
  const { orbit, source } = planner(30, { regionBlocks: 4, pauseResume: false });
  const batch = [decoding(1, 20), decoding(2, 24), decoding(3, 20)];
  orbit.beforeStep(batch);
  assertEquals(source.asked[0].serveAll, true);
  assertEquals(orbit.pauseRequested(), undefined);
  assertEquals(orbit.feasible(), true);
  assertEquals(orbit.toPause(batch), []);
  assertEquals(orbit.stats().pauses, 0);
  assertEquals(batch.map((r) => orbit.distanceOf(r)), [0, 0, 0]);
  orbit.close();
});

/** A decoding request with `computed` context tokens, its generated ids delivered. */
function grown(id: number, computed: number, maxTokens: number): Request {
  const generated = new Array(computed - 6).fill(1);
  return stage(testRequest(id, { ids: [1, 2, 3, 4, 5, 6], maxTokens }), "decoding", {
    computed,
    generated,
  });
}

Deno.test("orbit offload: a paused request comes back only after a completion and a feasible plan including it (OrbitFlow §3.4)", async () => {
  // A 4-block region holds nobody's layer (6+ blocks), so nobody offloads; 74 blocks hold three
  // requests whose plans end at 6 blocks a layer (24 each). Request 2 goes on further (7 a layer
  // by its window's end) and is the largest: with four running it is paused.
  const { orbit, source } = planner(78, { window: 4, regionBlocks: 4 });
  const [a, b, c, d] = [grown(1, 20, 18), grown(2, 22, 40), grown(3, 20, 18), grown(4, 20, 18)];
  orbit.beforeStep([a, b, c, d]);
  assertEquals(orbit.toPause([a, b, c, d]).map((r) => r.id), [2]);
  b.pause();
  const asked = () => source.asked.length;
  // It has left; the three left fit. No completion yet: it waits, and so does everyone behind it.
  for (let i = 0; i < 5; i++) orbit.beforeStep([a, c, d]);
  await null;
  assertEquals(orbit.feasible(), false, "left the batch, but nothing completed");
  assertEquals(source.asked.filter((i) => i.noPause).length, 0, "no resume check before one");
  // Request 1 completes: a plan with request 2 back is checked, and infeasible (24 + 24 + 28 > 74).
  a.end("length");
  orbit.beforeStep([c, d]);
  await null;
  const check = source.asked.at(-1)!;
  assert(check.noPause, "a resume check, naming no one to pause, asked last");
  assertEquals(check.requests.map((r) => r.id).sort(), [2, 3, 4]);
  assertEquals(check.requests.find((r) => r.id === 2)!.blocksPerLayer, 6, "all its context back");
  assertEquals(orbit.feasible(), false, "a completion, but no feasible plan with it");
  assertEquals(orbit.pauseRequested(), undefined, "an infeasible check pauses no one");
  // Steps go on with no completion: it is not checked again.
  const n = asked();
  for (let i = 0; i < 3; i++) orbit.beforeStep([c, d]);
  assertEquals(source.asked.slice(n).filter((i) => i.noPause).length, 0);
  // Request 3 completes: the plan with it fits, and it may come back.
  c.end("length");
  orbit.beforeStep([d]);
  await null;
  assert(source.asked.at(-1)!.noPause);
  assertEquals(orbit.feasible(), true, "a completion and a feasible plan including it");
  // Readmitted: it is running again and counted.
  b.admit(0, 1, 0);
  orbit.beforeStep([d, b]);
  const stats = orbit.stats();
  assertEquals([stats.pauses, stats.resumeChecks, stats.resumes], [1, 2, 1]);
  assertEquals(orbit.feasible(), true);
  orbit.close();
});

// ---- the runtime, over the fake engine and the real planner Worker ----

const PROMPTS = [[5, 6, 7, 8, 9, 10], [11, 12, 13, 14, 15, 16], [17, 18, 19, 20, 21, 22]];
const MAX_TOKENS = 20;

/**
 * Three requests that end at 26 tokens (7 blocks a layer, 84 in all) on 64 device blocks beside a
 * 16-block prefetch region: they fit only if someone offloads. Until the first plan has come (or
 * `release()`) the engine holds its steps back, so the test does not race the Worker's start.
 */
function tightRuntime(
  offload: RuntimeOptions["offload"],
  more: Partial<RuntimeOptions> = {},
  stepMs = 0, // each step's time once planned: long enough, plans come back within a step or two
  deviceBlocks = 80,
) {
  let released = false;
  const deadline = performance.now() + 20_000;
  const planned = () =>
    released || offload !== "orbit" || (runtime.stats().planner?.solves ?? 0) > 0 ||
    performance.now() > deadline;
  const engine = new FakeEngine({
    numLayers: LAYERS,
    blockSize: BLOCK,
    blocksPerArena: [deviceBlocks],
    maxBlocksPerSeq: 16,
    maxSlots: 4,
    maxRows: 32,
    hostBlocks: 200,
  }, async () => {
    while (!planned()) await new Promise((r) => setTimeout(r, 5));
    if (stepMs > 0) await new Promise((r) => setTimeout(r, stepMs));
  });
  const info = engine.info as { costModel?: CostModel; kvBlockBytes: number };
  info.costModel = costModel();
  info.kvBlockBytes = 4096;
  // The engine asks `planned` only once steps run, by when `runtime` is set.
  const runtime: Runtime = new Runtime(engine, {
    policy: "fcfs",
    offload,
    prefetchBlocks: 16,
    maxQueue: 10,
    maxTokensLimit: 100,
    eosIds: [],
    ...more,
  });
  return { runtime, engine, release: () => released = true };
}

async function runBatch(runtime: Runtime, maxTokens = MAX_TOKENS): Promise<number[][]> {
  const handles = PROMPTS.map((ids, i) =>
    runtime.submit({ ids, maxTokens, sampling: greedy(i), stopIds: [] })
  );
  return await Promise.all(handles.map(async (h) => {
    const got: number[] = [];
    for await (const ev of h.tokens) got.push(ev.id);
    assertEquals((await h.done).reason, "length");
    return got;
  }));
}

async function settled(runtime: Runtime): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const s = runtime.stats();
    if (s.kvBlocksUsed === 0 && s.hostBlocksUsed === 0 && runtime.openRequests === 0) return;
    await new Promise((r) => setTimeout(r, 0));
  }
}

Deno.test("orbit offload: over-subscribed device, same tokens as without offload, planned distances applied, no leak", async () => {
  const want = PROMPTS.map((p, i) => toyGeneration(p, MAX_TOKENS, i, 1000));

  const plain = tightRuntime("none");
  assertEquals(await runBatch(plain.runtime), want);
  const plainStats = plain.runtime.stats();
  assert(plainStats.preemptions > 0, "the budget should force preemption without offload");
  await plain.runtime.close();

  const { runtime, engine } = tightRuntime("orbit");
  try {
    assertEquals(await runBatch(runtime), want);
    await settled(runtime);
    const s = runtime.stats();
    assert(s.planner!.solves > 0, "no plan came back");
    assert(s.offload!.blocksPrefetched > 0, `nothing prefetched: ${JSON.stringify(s.offload)}`);
    assert(engine.copied.prefetched > 0);
    assert(
      s.preemptions < plainStats.preemptions,
      `offloading should preempt less (${s.preemptions} vs ${plainStats.preemptions})`,
    );
    assertEquals(s.kvBlocksUsed, 0, "device blocks left allocated");
    assertEquals(s.hostBlocksUsed, 0, "host blocks left allocated");
  } finally {
    await runtime.close();
  }
  assert(engine.closed);
});

Deno.test("orbit offload: a request the planner pauses keeps its KV until room is claimed, gives up layers, resumes with the same tokens", async () => {
  const want = PROMPTS.map((p, i) => toyGeneration(p, 40, i, 1000));
  // Three requests of 46 tokens (48 blocks each) on 120 blocks beside a 2-block region, which
  // holds no one's layer: once no plan holds all three for its window (about 25 tokens in), the
  // planner pauses one. The other two then grow into its blocks (96 of theirs and its own 28 or
  // so): its layers go, as few as make the room, their full blocks already on the host
  // (write-through puts them there as they fill).
  const { runtime } = tightRuntime("orbit", { prefetchBlocks: 2, writeThrough: true }, 10, 122);
  try {
    assertEquals(await runBatch(runtime, 40), want);
    await settled(runtime);
    const s = runtime.stats();
    const lazy = s.planner!.lazyPause!;
    assert(s.planner!.pauses > 0, `the planner paused no one: ${JSON.stringify(s.planner)}`);
    assertEquals(lazy.held, s.planner!.pauses, "every planner pause kept its KV");
    assert(lazy.layersEvicted > 0 && lazy.layersEvicted < 4 * lazy.held, JSON.stringify(lazy));
    assertEquals(lazy.resumed, lazy.held, JSON.stringify(lazy));
    assertEquals(lazy.blocksRestored, lazy.blocksEvicted, "what was taken came back, no more");
    assertEquals(s.kvBlocksUsed, 0, "device blocks left allocated");
    assertEquals(s.hostBlocksUsed, 0, "host blocks left allocated");
  } finally {
    await runtime.close();
  }
});

Deno.test("orbit offload: close() during a solve stops the planner's Worker", async () => {
  const { runtime, release } = tightRuntime("orbit");
  const h = runtime.submit({ ids: PROMPTS[0], maxTokens: MAX_TOKENS, sampling: greedy() });
  // Wait until a plan has been asked for (its Worker is starting or solving), then close.
  for (let i = 0; i < 200; i++) {
    const asked = Object.values(runtime.stats().planner!.requested).reduce((a, b) => a + b, 0);
    if (asked > 0) break;
    await new Promise((r) => setTimeout(r, 5));
  }
  assert(runtime.stats().planner!.solves === 0, "the plan came back before close()");
  const closing = runtime.close(); // stops the planner at once, then waits for the loop
  release();
  await closing;
  for await (const _ of h.tokens);
  assertEquals((await h.done).reason, "shutdown");
});

Deno.test("offload modes: uniform defaults to distance 2; each mode but none needs a host tier; orbit needs a cost model", async () => {
  const base = { policy: "fcfs" as const, maxQueue: 1, maxTokensLimit: 10, eosIds: [] };
  const host = new FakeEngine({ hostBlocks: 64, blocksPerArena: [64] });
  const uniform = new Runtime(host, { ...base, offload: "uniform" });
  assert(uniform.stats().offload !== null);
  assertEquals(uniform.stats().planner, undefined);
  await uniform.close();
  const none = new Runtime(new FakeEngine({ hostBlocks: 64 }), {
    ...base,
    offload: "none",
    offloadDistance: 3,
  });
  assertEquals(none.stats().offload, null);
  await none.close();
  for (const offload of ["uniform", "orbit"] as const) {
    assertThrows(() => new Runtime(new FakeEngine(), { ...base, offload }), /host KV tier/);
  }
  assertThrows(
    () => new Runtime(new FakeEngine({ hostBlocks: 64 }), { ...base, offload: "orbit" }),
    /cost model/,
  );
});
