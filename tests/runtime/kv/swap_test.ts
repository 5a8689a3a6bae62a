// Swapper (runtime/kv/swap.ts): a swap-out copies what the host lacks and refuses, changing
// nothing, when the host is full or a cache copy in has not filled the request's blocks yet; with
// reuse a second swap-out moves only the KV made since the first, and without it copies everything
// again, but never a host block twice in one step nor device blocks a swap-in has not filled yet;
// write-through mirrors full blocks ahead of time, only into free host blocks.

import { BlockPool } from "../../../runtime/kv/block_pool.ts";
import { HostTier } from "../../../runtime/kv/host_tier.ts";
import { Swapper } from "../../../runtime/kv/swap.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { testRequest } from "../../helpers/requests.ts";

/** 2 layers, blocks of 4 positions, 32 device blocks; a host tier of `hostBlocks`. */
function setup(hostBlocks = 32, reuse = true) {
  const device = new BlockPool({ blocksPerArena: [32], layerArena: [0, 0], blockSize: 4 });
  const tier = new HostTier(device, hostBlocks);
  return { device, tier, swapper: new Swapper(tier, reuse) };
}

/** A request whose first `tokens` positions are computed into device blocks. */
function computed(device: BlockPool, id: number, tokens: number) {
  const req = testRequest(id, { ids: Array.from({ length: tokens }, (_, i) => i) });
  device.growAll(req.id, tokens);
  req.admit(0, 0, tokens);
  return req;
}

/** Runs the step the tier has queued: its copies are "done" and its landings delivered. */
function deliver(tier: HostTier) {
  const step = tier.take();
  tier.land(step.landings);
  return step.copies;
}

Deno.test("swap: out copies every computed block; in copies the first blocks back", () => {
  const { device, tier, swapper } = setup();
  const req = computed(device, 1, 10);
  assert(swapper.swapOut(req));
  const out = deliver(tier);
  assertEquals(out.map((c) => [c.direction, c.deviceBlocks.length]), [["out", 3], ["out", 3]]);
  assertEquals([req.hostTokens, req.swapsOut, tier.pool.heldBy(req.id)], [10, 1, 6]);
  device.release(req.id);
  device.growAll(req.id, 9);
  swapper.swapIn(req, 9);
  assertEquals(deliver(tier).map((c) => [c.direction, c.hostBlocks]), [
    ["in", tier.pool.table(1, 0).slice(0, 3)],
    ["in", tier.pool.table(1, 1).slice(0, 3)],
  ]);
  assertEquals(swapper.stats, {
    swapsOut: 1,
    swapsIn: 1,
    blocksOut: 6,
    blocksIn: 6,
    blocksWrittenThrough: 0,
    repeatSwapsOut: 0,
    repeatBlocksOut: 0,
  });
});

Deno.test("swap: with reuse a second swap-out moves only from the last partial block on", () => {
  for (const reuse of [true, false]) {
    const { device, tier, swapper } = setup(32, reuse);
    const req = computed(device, 1, 10); // blocks 0, 1 full; block 2 partial
    swapper.swapOut(req);
    deliver(tier);
    device.growAll(req.id, 16);
    req.admit(0, 1, 16);
    assert(swapper.swapOut(req));
    const moved = deliver(tier).reduce((n, c) => n + c.deviceBlocks.length, 0);
    assertEquals(moved, reuse ? 2 * 2 : 2 * 4, `reuse ${reuse}`);
    assertEquals([swapper.stats.repeatSwapsOut, swapper.stats.repeatBlocksOut], [1, moved]);
  }
});

Deno.test("swap: without reuse, a swap-out after this step's write-through copies everything once", () => {
  const { device, tier, swapper } = setup(32, false);
  const req = computed(device, 1, 10);
  swapper.swapOut(req);
  deliver(tier);
  device.growAll(req.id, 26);
  req.admit(0, 1, 26); // blocks 0-5 full, block 6 partial
  swapper.writeThrough(req, 4); // blocks 2-5 of each layer, queued in the step being built
  assert(swapper.swapOut(req));
  const step = tier.take();
  const written = step.copies.flatMap((c) => c.hostBlocks);
  assertEquals(written.length, new Set(written).size, "no host block written twice");
  assertEquals(step.copies.map((c) => [c.direction, c.deviceBlocks.length]), [
    ["out", 7],
    ["out", 7],
  ]);
  tier.land(step.landings);
  assertEquals([req.hostIssued, req.hostTokens], [26, 26]);
  assertEquals(swapper.stats.blocksWrittenThrough, 0, "the write-through never ran");
});

Deno.test("swap: without reuse, a request swapped in and out by one step keeps its host copy", () => {
  const { device, tier, swapper } = setup(32, false);
  const req = computed(device, 1, 10);
  swapper.swapOut(req);
  deliver(tier);
  device.release(req.id);
  req.pause(true);
  // Admitted by swapping in, then preempted while the step is built: its device blocks were
  // never filled, so nothing is copied out of them.
  device.growAll(req.id, 9);
  swapper.swapIn(req, 9);
  req.admit(0, 1, 9);
  assert(swapper.swapOut(req));
  assertEquals(tier.take(), { copies: [], landings: [], afterLayer: [] });
  assertEquals([req.hostIssued, req.hostTokens], [10, 10]);
});

Deno.test("swap: a full host tier refuses, changing nothing", () => {
  const { device, tier, swapper } = setup(4);
  const req = computed(device, 1, 12); // 6 blocks over 2 layers
  assert(!swapper.swapOut(req));
  assertEquals([tier.pool.used, req.hostIssued, swapper.stats.swapsOut], [0, 0, 0]);
  assertEquals(tier.take().copies, []);
});

Deno.test("swap: nothing leaves blocks a queued cache copy in has not filled", () => {
  const { device, tier, swapper } = setup();
  const req = computed(device, 1, 8);
  tier.pool.grow("entry", 0, 4);
  const host = tier.pool.table("entry", 0);
  const fill = { direction: "in" as const, layer: 0, deviceBlocks: [device.table(1, 0)[0]] };
  tier.cacheCopy({}, [{ ...fill, hostBlocks: host }]);
  assert(!swapper.swapOut(req));
  swapper.writeThrough(req, 4);
  assertEquals(swapper.stats.blocksWrittenThrough, 0);
  deliver(tier);
  assert(swapper.swapOut(req), "once the step has run");
});

Deno.test("swap: write-through mirrors at most maxBlocks full blocks, into free host blocks only", () => {
  const { device, tier, swapper } = setup(6);
  const req = computed(device, 1, 15); // 3 full blocks a layer, one partial
  swapper.writeThrough(req, 2);
  assertEquals(deliver(tier).map((c) => c.deviceBlocks.length), [2, 2]);
  assertEquals(req.hostTokens, 8);
  // One more full block a layer fits the 2 free host blocks; the partial one is never mirrored.
  swapper.writeThrough(req, 2);
  assertEquals(deliver(tier).map((c) => c.deviceBlocks.length), [1, 1]);
  assertEquals([req.hostTokens, swapper.stats.blocksWrittenThrough], [12, 6]);
  // A full host tier: nothing, and nothing evicted for it.
  const other = computed(device, 2, 8);
  swapper.writeThrough(other, 2);
  assertEquals([tier.take().copies.length, tier.pool.heldBy(other.id)], [0, 0]);
  // A swap-out now needs room for the partial block, which the host no longer has.
  assert(!swapper.swapOut(req));
});
