// Preemption (runtime/preemption.ts): makeRoom frees the policy's victim until the needy request's
// blocks fit, never one with rows in this step; the victim's KV is recomputed, swapped, or only
// its oldest blocks dropped, as the rule says; a victim goes back to the head of the queue, and a
// request named for itself makes makeRoom say false.

import { Batch } from "../../runtime/batch.ts";
import { BlockPool } from "../../runtime/kv/block_pool.ts";
import { HostTier } from "../../runtime/kv/host_tier.ts";
import { Swapper } from "../../runtime/kv/swap.ts";
import { fcfsPolicy } from "../../runtime/policy/fcfs.ts";
import { policyContext } from "../../runtime/policy/context.ts";
import type { PreemptKv } from "../../runtime/policy/preset.ts";
import { batchSeats, Preemption } from "../../runtime/preemption.ts";
import type { Request } from "../../runtime/request/request.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { testRequest } from "../helpers/requests.ts";

/** Two requests of 12 computed positions (3 blocks a layer, 2 layers) in a 16-block pool. */
function setup(fixed: PreemptKv) {
  const pool = new BlockPool({ blocksPerArena: [16], layerArena: [0, 0], blockSize: 4 });
  const batch = new Batch(4);
  const tier = new HostTier(pool, 32);
  const host = { tier, swaps: new Swapper(tier) };
  const running: Request[] = [];
  for (const id of [1, 2]) {
    const req = testRequest(id, { ids: Array.from({ length: 12 }, (_, i) => i) });
    batch.enqueue(req);
    const { slot, order } = batch.seat(req);
    pool.growAll(req.id, 12);
    req.admit(slot, order, 12);
    running.push(req);
  }
  const context = policyContext({
    now: () => 0,
    maxSlots: 4,
    freeSlots: () => batch.freeSlots,
    maxRows: 8,
    pool,
    hostTier: true,
    costModel: () => undefined,
    kvBlockBytes: 0,
  });
  const preemption = new Preemption({
    pool,
    rule: { fixed, auto: false },
    context,
    maxRows: 8,
    host,
    placement: null,
    prefix: null,
  });
  return {
    pool,
    batch,
    tier,
    running,
    preemption,
    seats: (inStep = new Set<Request>()) => batchSeats(batch, fcfsPolicy, inStep),
  };
}

Deno.test("preemption: recompute frees the newest admitted whole and requeues it at the head", () => {
  const { pool, batch, running: [a, b], preemption, seats } = setup("recompute");
  assert(!pool.canGrowAll(a.id, 24)); // 6 blocks a layer: 6 more, 4 free
  assert(preemption.makeRoom(a, 24, seats()));
  assertEquals([batch.running, batch.waiting, b.state, b.computed], [[a], [b], "paused", 0]);
  assertEquals([pool.heldBy(b.id), preemption.count, preemption.choices.dropAll], [0, 1, 1]);
});

Deno.test("preemption: partial drops only as many of the victim's oldest blocks as make room", () => {
  const { pool, batch, running: [a, b], preemption, seats } = setup("partial");
  assert(preemption.makeRoom(a, 24, seats())); // 6 blocks a layer: 6 more, 4 free: 1 of b's
  assertEquals([b.state, b.dropped, pool.heldBy(b.id), batch.waiting], ["paused", 4, 4, [b]]);
  assertEquals(preemption.choices, { swap: 0, dropOldest: 1, dropAll: 0 });
});

Deno.test("preemption: swap sends the victim's KV to the host tier", () => {
  const { pool, tier, running: [a, b], preemption, seats } = setup("swap");
  assert(preemption.makeRoom(a, 24, seats()));
  assertEquals([b.swapped, b.hostIssued, tier.pool.heldBy(b.id), pool.heldBy(b.id)], [
    true,
    12,
    6,
    0,
  ]);
  assertEquals(tier.take().copies.map((c) => c.direction), ["out", "out"]);
});

Deno.test("preemption: a request with rows in the step is not a victim; one named for itself gives up", () => {
  const { batch, running: [a, b], preemption, seats } = setup("recompute");
  // b has rows in this step: a is the only candidate, and fcfs names it (the newest of one).
  assertEquals(preemption.makeRoom(a, 24, seats(new Set([b]))), false);
  assertEquals([a.state, batch.running], ["paused", [b]]);
  preemption.pause(b, false, seats());
  assertEquals(batch.waiting, [b, a]);
});
