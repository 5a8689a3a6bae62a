// The blocks a speculating request's rejected drafts took (pure host logic: the scheduler driven
// step by step, its records made up here). Draft rows are given blocks for their positions before
// the step runs; once their verification is back, the blocks wholly past the KV the request keeps
// (its accepted tokens') go back to the pool at once, not when it ends, also when it was preempted
// keeping its newest blocks while the verification was in flight. The prefix cache never holds a
// rejected draft, and every block is freed at the end.

import type { StepRecords } from "../../../engine/engine.ts";
import { fcfsPolicy } from "../../../runtime/policy/fcfs.ts";
import type { Request } from "../../../runtime/request/request.ts";
import { Scheduler } from "../../../runtime/scheduler.ts";
import { type Drafter, Speculation } from "../../../runtime/speculative/speculation.ts";
import type { BuiltStep } from "../../../runtime/step_builder.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { testRequest } from "../../helpers/requests.ts";

/** What the drafter always proposes: a record of DRAFT at a draft's row accepts it. */
const DRAFT = 9;
const BLOCK = 2;
const LAYERS = 2;

function drafting(blocks: number, options: { prefixCache?: boolean; partial?: boolean } = {}) {
  const drafter: Drafter = { propose: (_req, k) => new Array(k).fill(DRAFT) };
  const scheduler = new Scheduler({
    kv: {
      shape: { blocksPerArena: [blocks], layerArena: new Array(LAYERS).fill(0), blockSize: BLOCK },
      prefixCache: options.prefixCache,
      preempt: options.partial ? { fixed: "partial", auto: false } : undefined,
    },
    limits: { maxSlots: 8, maxRows: 32, maxBlocksPerSeq: 32 },
    policy: fcfsPolicy,
    speculation: new Speculation(4, drafter),
  });
  return { scheduler, pool: scheduler.space.pool };
}

/** Delivers `step` with these sampled ids, one per sample row in order. */
function deliver(scheduler: Scheduler, step: BuiltStep | null, ids: number[]): void {
  assert(step);
  assertEquals(ids.length, step.plan.samples.length);
  scheduler.deliver(step, ids.map((id) => ({ id, logprob: 0, top: [] })) as StepRecords);
}

/** The KV a decoding request holds: every token's but its newest (its next row's input). */
function kvLength(req: Request): number {
  return req.promptLength + req.generated.length - 1;
}

Deno.test("after a verification with rejected drafts, the pool holds the blocks the accepted tokens need, no more", () => {
  const BLOCKS = 32;
  const { scheduler, pool } = drafting(BLOCKS);
  const req = testRequest(1, { ids: [1, 2, 3], maxTokens: 12 });
  scheduler.submit(req);
  deliver(scheduler, scheduler.schedule(), [7]); // the prefill: positions 0..2, 2 blocks a layer
  // Its decode row at 3 and four drafts at 4..7: blocks for 8 positions.
  const a = scheduler.schedule();
  assertEquals(a?.runs?.[0].drafts, [DRAFT, DRAFT, DRAFT, DRAFT]);
  assertEquals(pool.used, LAYERS * pool.blocksFor(8));
  // Two drafts accepted, the third rejected: the KV of positions 0..5 is kept (3 blocks a layer).
  deliver(scheduler, a, [DRAFT, DRAFT, 5, 0, 0]);
  assertEquals(req.generated, [7, DRAFT, DRAFT, 5]);
  assertEquals([req.computed, kvLength(req)], [6, 6]);
  assertEquals(pool.freeIn(0), BLOCKS - LAYERS * pool.blocksFor(6));
  // Every draft rejected: rows at 6..10 were given 6 blocks a layer; 4 stay (positions 0..6).
  const b = scheduler.schedule();
  assertEquals(b?.runs?.[0].pos, 6);
  assertEquals(pool.used, LAYERS * pool.blocksFor(11));
  deliver(scheduler, b, [1, 2, 3, 4, 5]);
  assertEquals([req.computed, kvLength(req)], [7, 7]);
  assertEquals(pool.freeIn(0), BLOCKS - LAYERS * pool.blocksFor(7));
  runToEnd(scheduler);
  assertEquals(req.generated.length, 12);
  assertEquals(pool.used, 0, "every block freed at the end");
});

Deno.test("a request preempted keeping its newest blocks while its drafts are verified gives back the rejected drafts' blocks", () => {
  // 10 blocks a layer: a (9 positions, 5 blocks) and b (4, 2 blocks), which does not speculate.
  const { scheduler, pool } = drafting(20, { partial: true });
  const a = testRequest(1, { ids: [1, 2, 3, 4, 5, 6, 7, 8, 9], maxTokens: 10 });
  const b = testRequest(2, { ids: [4, 3, 2, 1], maxTokens: 10, speculate: false });
  // b first: the policy's victim is the request admitted last.
  scheduler.submit(b);
  scheduler.submit(a);
  deliver(scheduler, scheduler.schedule(), [7, 7]);
  // a's decode row at 9 and drafts at 10..13 (7 blocks a layer); b's row at 4 (3 blocks): full.
  const drafts = scheduler.schedule();
  assertEquals(pool.freeIn(0), 0);
  // b decodes on while a waits for its verification; its row at 6 needs a block a layer, which
  // a gives up: its oldest (a partial drop), keeping the rest, draft blocks too.
  const five = scheduler.schedule();
  const six = scheduler.schedule();
  assertEquals([a.state, a.dropped, scheduler.space.preemptChoices.dropOldest], ["paused", 2, 1]);
  assertEquals(pool.heldBy(a.id), LAYERS * (7 - 1));
  // Every draft rejected: of its positions 0..9 it holds blocks 1..4; blocks 5 and 6 go back.
  deliver(scheduler, drafts, [7, 5, 0, 0, 0, 0]);
  assertEquals(a.computed, 10);
  assertEquals(pool.heldBy(a.id), LAYERS * (pool.blocksFor(10) - 1));
  assertEquals(pool.freeIn(0), 20 - pool.heldBy(a.id) - pool.heldBy(b.id));
  deliver(scheduler, five, [7]);
  deliver(scheduler, six, [7]);
  runToEnd(scheduler);
  assertEquals([a.generated.length, b.generated.length], [10, 10]);
  assertEquals(pool.used, 0, "every block freed at the end");
});

Deno.test("with the prefix cache, cached blocks hold accepted tokens only; all are freed at the end", () => {
  const { scheduler, pool } = drafting(64, { prefixCache: true });
  const req = testRequest(1, { ids: [1, 2, 3], maxTokens: 16 });
  scheduler.submit(req);
  deliver(scheduler, scheduler.schedule(), [7]);
  // Drafts at 4..7 (9 9 9 9); two accepted, then 5: positions 4..6 hold 9 9 5.
  deliver(scheduler, scheduler.schedule(), [DRAFT, DRAFT, 5, 0, 0]);
  runToEnd(scheduler);
  const kept = [1, 2, 3, ...req.generated];
  assertEquals(kept.slice(0, 7), [1, 2, 3, 7, DRAFT, DRAFT, 5]);
  const index = scheduler.space.prefixIndex!;
  // A prompt of the rejected drafts' tokens matches the blocks up to them, not the one past.
  const rejected = [1, 2, 3, 7, DRAFT, DRAFT, DRAFT, DRAFT, 0];
  assertEquals(index.acquire("probe drafts", rejected, 99).length, 3);
  assert(index.acquire("probe kept", kept, 99).length >= 4);
  pool.release("probe drafts");
  pool.release("probe kept");
  assertEquals(pool.used, pool.idle, "only cached blocks nobody holds are left");
  index.clear();
  assertEquals(pool.used, 0, "every block freed at the end");
});

/** Runs every request to its end, each draft accepted (a group's records, step by step). */
function runToEnd(scheduler: Scheduler): void {
  for (let i = 0; i < 500 && scheduler.hasWork; i++) {
    const step = scheduler.schedule();
    if (!step) continue;
    const records = (step.plan.group?.steps ?? 1) * step.plan.samples.length;
    scheduler.deliver(
      step,
      Array.from({ length: records }, () => ({ id: DRAFT, logprob: 0, top: [] })),
    );
  }
  assert(!scheduler.hasWork, "requests left after 500 steps");
}
