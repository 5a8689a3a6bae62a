// Offloader (runtime/kv/offload.ts): the prefetch region is set aside at start; an offloaded
// layer's full blocks go out as they are written and leave the device once landed; each step
// claims region room for them and prefetches them there (a request the region cannot hold sits the
// step out); a layer kept on the device again gets blocks back and its KV copied in.

import { BlockPool } from "../../../runtime/kv/block_pool.ts";
import { HostTier } from "../../../runtime/kv/host_tier.ts";
import { OFFLOADED, Offloader, PREFETCH_REGION } from "../../../runtime/kv/offload.ts";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";
import { testRequest } from "../../helpers/requests.ts";

/** 2 layers of one 40-block arena, blocks of 4 positions; a 3-block region; a host tier. */
function setup(region = 3) {
  const device = new BlockPool({ blocksPerArena: [40], layerArena: [0, 0], blockSize: 4 });
  const tier = new HostTier(device, 32);
  return { device, tier, offloader: new Offloader(device, tier, region) };
}

/** A running request in `slot` whose first `tokens` positions are computed on the device. */
function running(device: BlockPool, id: number, tokens: number, slot = id) {
  const req = testRequest(id, { ids: Array.from({ length: tokens }, (_, i) => i) });
  device.growAll(req.id, tokens);
  req.admit(slot, id, tokens);
  return req;
}

/** Runs the queued copies: the step is delivered. */
function deliver(tier: HostTier) {
  const step = tier.take();
  tier.land(step.landings);
  return step.copies;
}

Deno.test("offload: the region is set aside in every arena at start, or the start fails", () => {
  const { device, offloader } = setup();
  assertEquals([offloader.regionTotal, device.used], [3, 3]);
  assertEquals(device.table(PREFETCH_REGION, 0).length, 3);
  const small = new BlockPool({ blocksPerArena: [2], layerArena: [0, 0], blockSize: 4 });
  assertThrows(() => new Offloader(small, new HostTier(small, 8), 3), /cannot spare 3 blocks/);
});

Deno.test("offload: an offloaded layer's full blocks go out, leave the device once landed, and come back through the region each step", () => {
  const { device, tier, offloader } = setup();
  const req = running(device, 1, 14); // 3 full blocks a layer and a partial one
  assert(offloader.setDistance(req, 2)); // layer 1 of 2
  assert(offloader.offloads(req));
  offloader.beginStep([req]);
  const out = deliver(tier);
  assertEquals(out.map((c) => [c.direction, c.layer, c.deviceBlocks.length]), [["out", 1, 3]]);
  assertEquals(device.marked(req.id, 1, OFFLOADED), 0, "not before the copy has landed");
  offloader.beginStep([req]);
  assertEquals(deliver(tier), [], "nothing new to copy");
  assertEquals(device.table(req.id, 1).slice(0, 3), [OFFLOADED, OFFLOADED, OFFLOADED]);
  assertEquals(device.used, 3 + 4 + 1, "region, layer 0, layer 1's partial block");
  assert(offloader.claimRegion(req));
  const { prefetch, tables } = offloader.take();
  const region = device.table(PREFETCH_REGION, 0);
  assertEquals(prefetch, [{
    layer: 1,
    deviceBlocks: region,
    hostBlocks: tier.pool.table(req.id, 1).slice(0, 3),
  }]);
  assertEquals(tables, [{ slot: 1, layer: 1, first: 0, blocks: region }]);
  assertEquals(offloader.stats, {
    blocksOut: 3,
    blocksOutAfterLayer: 0,
    blocksPrefetched: 3,
    blocksRestored: 0,
    regionStalls: 0,
  });
});

Deno.test("offload: a request the region cannot hold beside others sits the step out", () => {
  const { device, tier, offloader } = setup();
  const a = running(device, 1, 12), b = running(device, 2, 8);
  for (const req of [a, b]) offloader.setDistance(req, 1); // both layers of each
  offloader.beginStep([a, b]);
  deliver(tier);
  offloader.beginStep([a, b]);
  assertEquals([device.marked(a.id, 0, OFFLOADED), device.marked(b.id, 0, OFFLOADED)], [3, 2]);
  assert(offloader.claimRegion(a));
  assert(!offloader.claimRegion(b));
  assertEquals(offloader.stats.regionStalls, 1);
  assertEquals(offloader.take().prefetch.map((p) => p.layer), [0, 1]);
});

Deno.test("offload: a layer kept on the device again gets blocks back and its KV copied in", () => {
  const { device, tier, offloader } = setup();
  const req = running(device, 1, 12);
  offloader.setDistance(req, 2);
  offloader.beginStep([req]);
  deliver(tier);
  offloader.beginStep([req]);
  assertEquals(device.marked(req.id, 1, OFFLOADED), 3);
  assert(offloader.setDistance(req, 0));
  assert(!offloader.offloads(req));
  const back = device.table(req.id, 1);
  assert(back.every((b) => b >= 0));
  assertEquals(deliver(tier), [{
    direction: "in",
    layer: 1,
    deviceBlocks: back,
    hostBlocks: tier.pool.table(req.id, 1),
  }]);
  assertEquals(
    offloader.take().tables,
    back.map((b, i) => ({ slot: 1, layer: 1, first: i, blocks: [b] })),
  );
  assertEquals(offloader.stats.blocksRestored, 3);
  // Offloaded again, its host copy is still whole: nothing moves.
  offloader.setDistance(req, 2);
  offloader.beginStep([req]);
  assertEquals(deliver(tier), []);
});

Deno.test("offload: refused while a request refills dropped blocks or holds no slot; forgotten when it leaves", () => {
  const { device, tier, offloader } = setup();
  const req = running(device, 1, 12);
  req.pauseKeepingNewest(4);
  assert(!offloader.setDistance(req, 2));
  req.resumeInPlace(1, 2);
  assert(!offloader.setDistance(req, 2), "still refilling");
  const other = running(device, 2, 8);
  offloader.setDistance(other, 1);
  offloader.beginStep([other]);
  offloader.forget(other, false);
  assertEquals([offloader.distanceOf(other), deliver(tier).length], [0, 0]);
  assertThrows(() => offloader.setDistance(other, -1), /integer >= 0/);
});
