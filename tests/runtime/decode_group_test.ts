// Multi-step decode's scheduling on the fake engine (no GPU): how long a group may be
// (decode_group.ts), when the scheduler makes one (only when it has nothing to decide: no request
// waiting, no prefill, no pause), and that requests get exactly the tokens their prompts alone
// determine when they finish, stop, are cancelled or preempted inside groups. The fake engine runs
// a group as the GPU does and refuses rows at positions whose blocks were not given, so a group
// that outran its requests' blocks fails here.

import { FakeEngine, type FakeEngineShape, toyGeneration } from "../../sim/fake_engine.ts";
import type { SampleRecord, StepEngine, StepPlan } from "../../engine/engine.ts";
import { groupSize } from "../../runtime/decode_group.ts";
import { Runtime } from "../../runtime/service.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { costModelWithLayer } from "../helpers/cost_models.ts";
import { greedy } from "../helpers/requests.ts";
import { sumsOf } from "../../engine/kv/cost_model.ts";
import { fcfsPolicy } from "../../runtime/policy/fcfs.ts";
import type { SchedulingPolicy } from "../../runtime/policy/policy.ts";
import type { Request } from "../../runtime/request/request.ts";
import { Scheduler } from "../../runtime/scheduler.ts";
import type { BuiltStep } from "../../runtime/step_builder.ts";
import { testRequest } from "../helpers/requests.ts";

Deno.test("a group is as long as fits in its time at the predicted step time, at most --decode-steps", () => {
  const steps = { max: 8, groupMs: 200 };
  assertEquals(groupSize(steps, 25), 8);
  assertEquals(groupSize(steps, 60), 3);
  assertEquals(groupSize(steps, 500), 1);
  assertEquals(groupSize(steps, null), 1, "nothing measured yet");
  assertEquals(groupSize({ max: 1, groupMs: 200 }, 1), 1, "--decode-steps 1: no groups");
});

/** Four layers of 15 ms: a step is predicted at about 60 ms, so a 200 ms group holds 3 steps. */
const SLOW = costModelWithLayer(15, 0, {
  roundTripMs: 0,
  layerFit: sumsOf([[1, 15], [16, 15]], 1e9),
});

interface Logged {
  steps: number;
  waiting: number;
  rows: number;
}

/** A runtime over the fake engine with groups of up to 8; each step logs its size and the queue. */
function groupedRuntime(shape: FakeEngineShape, delay?: () => Promise<void>) {
  const fake = new FakeEngine({ maxDecodeSteps: 8, costModel: SLOW, ...shape }, delay);
  const log: Logged[] = [];
  // The log reads the queue of the runtime made below.
  const stats = () => runtime.stats();
  const engine: StepEngine = {
    info: fake.info,
    step(plan: StepPlan): Promise<SampleRecord[]> {
      const s = stats();
      log.push({
        steps: plan.group?.steps ?? 1,
        waiting: s.waiting + s.paused,
        rows: plan.rows.length,
      });
      return fake.step(plan);
    },
    close: () => fake.close(),
  };
  const runtime: Runtime = new Runtime(engine, {
    policy: "fcfs",
    maxQueue: 100,
    maxTokensLimit: 10_000,
    eosIds: [],
    decodeSteps: 8,
    decodeGroupMs: 200,
  });
  return { runtime, log, fake };
}

async function collect(h: { tokens: AsyncIterable<{ id: number }> }): Promise<number[]> {
  const ids: number[] = [];
  for await (const ev of h.tokens) ids.push(ev.id);
  return ids;
}

Deno.test("groups form only when no request waits, hold at most what the step time allows, and give each request its own tokens", async () => {
  const { runtime, log, fake } = groupedRuntime({ maxSlots: 2, blocksPerArena: [256] });
  const V = fake.info.vocabSize;
  const reqs = [
    { ids: [3, 1, 4], maxTokens: 13, seed: 1, stopIds: [] as number[] },
    { ids: [2, 7], maxTokens: 30, seed: 2, stopIds: [] as number[] },
    { ids: [9, 9, 9, 9, 9], maxTokens: 17, seed: 3, stopIds: [] as number[] },
  ];
  // The third stops on its sixth token's id (max_tokens and a stop id inside groups).
  reqs[2].stopIds = [toyGeneration(reqs[2].ids, 17, 3, V)[5]];
  const out = await Promise.all(
    reqs.map((r) => collect(runtime.submit({ ...r, sampling: greedy(r.seed) }))),
  );
  out.forEach((ids, i) => {
    const r = reqs[i];
    assertEquals(ids, toyGeneration(r.ids, r.maxTokens, r.seed, V, new Set(r.stopIds)));
  });
  assertEquals(out[2].length, 5);
  const groups = log.filter((l) => l.steps > 1);
  assert(groups.length > 0, "no group ran");
  assert(groups.every((l) => l.steps <= 3), `a group outran its time: ${JSON.stringify(log)}`);
  assert(groups.every((l) => l.waiting === 0), "a group ran while a request waited");
  assert(log.some((l) => l.steps === 1 && l.waiting > 0), "the queue never held one back");
  assertEquals(runtime.stats().kvBlocksUsed, 0);
  await runtime.close();
});

Deno.test("a request cancelled while its group is in flight gets nothing after the cancel; its blocks are freed", async () => {
  const { runtime, log, fake } = groupedRuntime(
    { maxSlots: 4, blocksPerArena: [256] },
    () => new Promise((r) => setTimeout(r, 2)),
  );
  const V = fake.info.vocabSize;
  const prompts = [[1, 2, 3], [4, 5], [6, 7, 8, 9]];
  const got = await Promise.all(prompts.map(async (ids, i) => {
    const ctrl = new AbortController();
    const h = runtime.submit({ ids, maxTokens: 200, sampling: greedy(i), signal: ctrl.signal });
    const out: number[] = [];
    let after = 0;
    for await (const ev of h.tokens) {
      if (ctrl.signal.aborted) after++;
      out.push(ev.id);
      if (out.length === 4 + 3 * i) ctrl.abort();
    }
    assertEquals(after, 0);
    assertEquals((await h.done).reason, "cancelled");
    return out;
  }));
  got.forEach((ids, i) => assertEquals(ids, toyGeneration(prompts[i], 4 + 3 * i, i, V)));
  assert(log.some((l) => l.steps > 1), "no group ran");
  // Blocks go back at the next step boundary: one more request gets there.
  await collect(runtime.submit({ ids: [1], maxTokens: 2, sampling: greedy() }));
  const s = runtime.stats();
  assertEquals([s.kvBlocksUsed, s.running + s.waiting + s.paused], [0, 0]);
  await runtime.close();
});

Deno.test("under a pool that forces preemption, requests decoding in groups get the tokens their prompts alone give", async () => {
  // 24 blocks of 4 positions per layer for 4 requests of up to 12 + 24 positions.
  const { runtime, log, fake } = groupedRuntime({
    maxSlots: 4,
    blocksPerArena: [48],
    numLayers: 2,
    blockSize: 4,
  });
  const V = fake.info.vocabSize;
  const reqs = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16], [1, 2], [3, 3, 3, 3, 3, 3], [8]];
  const out = await Promise.all(
    reqs.map((ids, i) => collect(runtime.submit({ ids, maxTokens: 24, sampling: greedy(10 + i) }))),
  );
  out.forEach((ids, i) => assertEquals(ids, toyGeneration(reqs[i], 24, 10 + i, V)));
  assert(runtime.stats().preemptions > 0, "nothing was preempted");
  assert(log.some((l) => l.steps > 1), "no group ran");
  assertEquals(runtime.stats().kvBlocksUsed, 0);
  await runtime.close();
});

Deno.test("a request's row stops at its max_tokens inside a group: no position past its last input is written", async () => {
  // 4 layers of 2 ms: groups of 8.
  const fast = costModelWithLayer(2, 0, {
    roundTripMs: 0,
    layerFit: sumsOf([[1, 2], [16, 2]], 1e9),
  });
  const { runtime, log, fake } = groupedRuntime({ maxSlots: 1, costModel: fast });
  const ids = [4, 4, 2];
  const out = await collect(runtime.submit({ ids, maxTokens: 13, sampling: greedy(5) }));
  assertEquals(out, toyGeneration(ids, 13, 5, fake.info.vocabSize));
  assert(log.some((l) => l.steps === 8), "no group of 8 ran");
  // The 13th token is sampled from position 3 + 11; nothing is computed after it.
  assertEquals(fake.highestPos[0], ids.length + 13 - 2);
  // And no step runs after it: the prefill's sample, then decode steps for the other 12.
  assertEquals(log.slice(1).reduce((n, l) => n + l.steps, 0), 12, JSON.stringify(log));
  await runtime.close();
});

Deno.test("--decode-steps 1 (or an engine without groups) runs one step per submission", async () => {
  const fake = new FakeEngine({ costModel: SLOW });
  const runtime = new Runtime(fake, {
    policy: "fcfs",
    maxQueue: 10,
    maxTokensLimit: 100,
    eosIds: [],
    decodeSteps: 8, // the engine's maxDecodeSteps is 1: it wins
  });
  await collect(runtime.submit({ ids: [1, 2], maxTokens: 20, sampling: greedy() }));
  assert(fake.groupSteps.every((k) => k === 1));
  await runtime.close();
});

Deno.test("a step in which the policy holds a request back or pauses one is a single step", () => {
  const hold = new Set<Request>();
  const pause: Request[] = [];
  const policy: SchedulingPolicy = {
    ...fcfsPolicy,
    holdBack: () => hold,
    pauseBeforeStep: () => pause.splice(0),
  };
  const scheduler = new Scheduler({
    kv: { shape: { blocksPerArena: [64], layerArena: [0, 0], blockSize: 4 } },
    limits: { maxSlots: 4, maxRows: 16, maxBlocksPerSeq: 16 },
    policy,
    decodeSteps: { max: 8, groupMs: 200 },
    time: { costModel: () => SLOW },
  });
  const [a, b] = [1, 2].map((id) => testRequest(id, { ids: [id, 5, 6], maxTokens: 40 }));
  scheduler.submit(a);
  scheduler.submit(b);
  const deliver = (step: BuiltStep | null) => {
    assert(step);
    // What is sampled does not matter here: every record is id 7.
    const records = (step.plan.group?.steps ?? 1) * step.plan.samples.length;
    scheduler.deliver(
      step,
      Array.from({ length: records }, () => ({ id: 7, logprob: 0, top: [] })),
    );
    return step.plan.group?.steps ?? 1;
  };
  assertEquals(deliver(scheduler.schedule()), 1, "the prefill step");
  assertEquals(deliver(scheduler.schedule()), 3, "a quiet decode step: a group of 3 (60 ms steps)");
  hold.add(b);
  assertEquals(deliver(scheduler.schedule()), 1, "b held back");
  hold.clear();
  assertEquals(deliver(scheduler.schedule()), 3);
  pause.push(b);
  assertEquals(deliver(scheduler.schedule()), 1, "b paused");
  assertEquals(scheduler.policyPauses, 1);
});
