// HostTier (runtime/kv/host_tier.ts): the host pool and the copies in flight. A request's copies
// out land only when the step carrying them is delivered, and not at all once its host copy was
// released; an offloaded layer's copies and a swap's share one host copy (neither copies what the
// other has sent); nothing is copied out of a block a queued cache copy in has not filled; a step
// carries the swaps', the cache's and the layers' copies in that order, and a layer's copies
// out after its layer apart.

import { BlockPool } from "../../../runtime/kv/block_pool.ts";
import { HostTier } from "../../../runtime/kv/host_tier.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { testRequest } from "../../helpers/requests.ts";

/** A device pool of 2 layers (one arena of 32 blocks of 4 positions) and a 16-block host tier. */
function tiers() {
  const device = new BlockPool({ blocksPerArena: [32], layerArena: [0, 0], blockSize: 4 });
  return { device, tier: new HostTier(device, 16) };
}

/** A request holding `tokens` positions on the device, all computed. */
function holding(device: BlockPool, id: number, tokens: number) {
  const req = testRequest(id, { ids: Array.from({ length: tokens }, (_, i) => i) });
  device.growAll(req.id, tokens);
  req.admit(0, 0, tokens);
  return req;
}

Deno.test("host tier: one host arena shaped like the device's layers; at least one block", () => {
  const { device, tier } = tiers();
  assertEquals([tier.pool.numLayers, tier.pool.blockSize, tier.pool.total], [2, 4, 16]);
  assertEquals(new HostTier(device, 0).pool.total, 1);
});

Deno.test("host tier: a copy out lands when its step is delivered, not before, and never after a release", () => {
  const { device, tier } = tiers();
  const req = holding(device, 1, 10);
  tier.pool.growAll(req.id, 10);
  assertEquals(tier.copyOut(req, 0, 10), 6, "3 blocks on each of 2 layers");
  assertEquals([req.hostIssued, req.hostTokens], [10, 0]);
  const step = tier.take();
  assertEquals(step.copies.map((c) => [c.direction, c.layer, c.deviceBlocks, c.hostBlocks]), [
    ["out", 0, device.table(1, 0), tier.pool.table(1, 0)],
    ["out", 1, device.table(1, 1), tier.pool.table(1, 1)],
  ]);
  assertEquals(tier.take(), { copies: [], landings: [], afterLayer: [] }, "taken once");
  tier.land(step.landings);
  assertEquals(req.hostTokens, 10);

  // Released while a second copy is in flight: it lands in blocks no longer the request's.
  device.growAll(req.id, 16);
  tier.pool.growAll(req.id, 16);
  tier.copyOut(req, 2, 16);
  const second = tier.take();
  tier.release(req);
  assertEquals([req.hostIssued, req.hostTokens, tier.pool.heldBy(req.id)], [0, 0, 0]);
  tier.land(second.landings);
  assertEquals(req.hostTokens, 0);
});

Deno.test("host tier: copies in bring the first blocks back; dropping them keeps the copies out", () => {
  const { device, tier } = tiers();
  const req = holding(device, 1, 8);
  tier.pool.growAll(req.id, 8);
  tier.copyOut(req, 0, 8);
  assertEquals(tier.copyIn(req, 5), 2);
  tier.dropCopiesIn(req);
  assertEquals(tier.take().copies.map((c) => c.direction), ["out", "out"]);
  tier.copyIn(req, 5);
  assertEquals(
    tier.take().copies.map((c) => [c.direction, c.deviceBlocks.length]),
    [["in", 2], ["in", 2]],
  );
});

Deno.test("host tier: an offloaded layer's copies and a swap's share one host copy", () => {
  const { device, tier } = tiers();
  const req = holding(device, 1, 12);
  // Layer 1's first two blocks go out as an offloaded layer's.
  assertEquals(tier.copyLayerOut(req, 1, 2), 2);
  assertEquals([tier.blocksOut(req, 0), tier.blocksOut(req, 1)], [0, 2]);
  assertEquals(tier.copyLayerOut(req, 1, 2), 0, "nothing new");
  // A swap-out of the whole request then copies layer 1 only from block 2 on.
  tier.pool.growAll(req.id, 12);
  assertEquals(tier.copyOut(req, 0, 12), 3 + 1);
  const step = tier.take();
  assertEquals(
    step.copies.map((c) => [c.layer, c.deviceBlocks.length]),
    [[0, 3], [1, 1], [1, 2]],
    "the swap's copies first, then the layer's",
  );
  assertEquals([tier.blocksOut(req, 0), tier.blocksOut(req, 1)], [3, 3]);
  tier.land(step.landings);
  assertEquals([req.hostTokens, tier.layerExtent(req, 1).landed], [12, 2]);
  // A release voids the layer's extent too.
  tier.release(req);
  assertEquals(tier.layerExtent(req, 1), { issued: 0, landed: 0 });
});

Deno.test("host tier: forgetting a request's layers keeps its copies out only when asked", () => {
  const { device, tier } = tiers();
  const req = holding(device, 1, 8);
  tier.copyLayerOut(req, 0, 2);
  tier.pool.growAll(req.id, 8);
  tier.copyLayerIn(req, 1, [{ index: 0, block: device.table(1, 1)[0] }]);
  tier.forgetLayers(req, true);
  let step = tier.take();
  assertEquals(step.copies.map((c) => c.direction), ["out"]);
  assertEquals(step.landings.length, 1);

  tier.copyLayerOut(req, 1, 2);
  tier.forgetLayers(req, false);
  step = tier.take();
  assertEquals([step.copies.length, step.landings.length], [0, 0]);
  assertEquals(tier.layerExtent(req, 1).issued, 0, "its extents are gone with it");
});

Deno.test("host tier: a cache copy in holds the host blocks it reads until its step is taken, and fills its device blocks", () => {
  const { device, tier } = tiers();
  const req = holding(device, 1, 4);
  tier.pool.grow("entry", 0, 4);
  tier.pool.grow("entry", 1, 4);
  const host = [tier.pool.table("entry", 0)[0], tier.pool.table("entry", 1)[0]];
  const copies = [0, 1].map((layer) => ({
    direction: "in" as const,
    layer,
    deviceBlocks: [device.table(1, layer)[0]],
    hostBlocks: [host[layer]],
  }));
  const owner = {};
  let landed = 0;
  tier.cacheCopy(owner, copies, () => landed++);
  assert(tier.filling(req), "its device blocks wait for the copy in");
  tier.pool.release("entry");
  assertEquals(tier.pool.used, 2, "the reads stay held");
  // Dropping one layer's copy keeps the other's read held.
  assertEquals(tier.dropCacheCopies(owner, (c) => c.layer === 0), 1);
  assertEquals(tier.pool.used, 1);
  const step = tier.take();
  assertEquals(step.copies.map((c) => c.layer), [1]);
  assertEquals(tier.pool.used, 0, "released once the step is taken");
  assert(!tier.filling(req));
  tier.land(step.landings);
  assertEquals(landed, 1);
});

Deno.test("host tier: a step carries the swaps', the cache's and the layers' copies in that order", () => {
  const { device, tier } = tiers();
  const a = holding(device, 1, 8);
  const b = holding(device, 2, 8);
  tier.copyLayerOut(b, 0, 2);
  tier.cacheCopy({}, [{ direction: "out", layer: 1, deviceBlocks: [30], hostBlocks: [15] }]);
  tier.pool.growAll(a.id, 8);
  tier.copyOut(a, 0, 8);
  const step = tier.take();
  assertEquals(step.copies.map((c) => c.hostBlocks.at(-1) === 15 ? "cache" : c.layer), [
    0,
    1,
    "cache",
    0,
  ]);
  assertEquals(step.landings.map((l) => "layer" in l ? "layer" : "tokens" in l ? "swap" : "?"), [
    "swap",
    "layer",
  ]);
});

Deno.test("host tier: a layer's copy out after its layer goes apart from the step's copies, and lands with it", () => {
  const { device, tier } = tiers();
  const req = holding(device, 1, 8);
  assertEquals(tier.copyLayerOut(req, 1, 2, true), 2);
  const step = tier.take();
  assertEquals(step.copies, []);
  assertEquals(step.afterLayer.map((c) => [c.direction, c.layer, c.deviceBlocks]), [
    ["out", 1, device.table(1, 1)],
  ]);
  assertEquals(tier.layerExtent(req, 1), { issued: 2, landed: 0 });
  tier.land(step.landings);
  assertEquals(tier.layerExtent(req, 1), { issued: 2, landed: 2 });
  // A request that leaves before its step is built takes its copies after layers with it.
  const other = holding(device, 2, 8);
  tier.copyLayerOut(other, 0, 2, true);
  tier.forgetLayers(other, false);
  assertEquals(tier.take().afterLayer, []);
});
