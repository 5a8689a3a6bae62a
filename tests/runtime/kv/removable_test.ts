// OrbitFlow's removable cache (§3.4, §4): a request paused by the planner keeps its device KV
// until room is claimed; then only as many of its layers as make the room leave the device (first
// blocks whose host copy has landed, then layers copied out on demand, as the paper's §4 does), and
// on resume only those come back from the host.

import { HostTier } from "../../../runtime/kv/host_tier.ts";
import { OFFLOADED } from "../../../runtime/kv/offload.ts";
import { RemovableCache } from "../../../runtime/kv/removable.ts";
import { onePool } from "../../helpers/pools.ts";
import { stage, testRequest } from "../../helpers/requests.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

const LAYERS = 4, B = 4;

/** A paused request holding `tokens` positions on every layer, the first `onHost` landed on the host. */
function held(
  pool: ReturnType<typeof onePool>,
  tier: HostTier,
  id: number,
  tokens: number,
  onHost: number,
) {
  const req = testRequest(id, {
    ids: Array.from({ length: tokens + 1 }, (_, i) => i + 1),
    maxTokens: 8,
  });
  assert(pool.growAll(id, tokens));
  assert(tier.pool.growAll(id, onHost));
  stage(req, "prefilling", { computed: tokens });
  req.hostCopyIssued(onHost);
  req.hostCopyLanded(onHost, req.hostEpoch);
  req.pauseKeepingNewest(0);
  return req;
}

Deno.test("removable cache: a paused request keeps its layers until room is claimed, then frees only what is needed", () => {
  // 40 blocks: the held request has 4 layers × 5 blocks (20 tokens), 4 of them per layer on the host.
  const pool = onePool(LAYERS, 40, B);
  const tier = new HostTier(pool, 100);
  const cache = new RemovableCache(pool, tier);
  const paused = held(pool, tier, 1, 20, 16);
  cache.hold(paused);
  assert(cache.holds(paused));
  // A running request grows to 16 tokens a layer (16 blocks): 20 are free, no room is claimed.
  const needy = testRequest(2, { ids: [1, 2, 3], maxTokens: 40 });
  assertEquals(cache.evictFor(needy, 16), false);
  assertEquals(pool.heldBy(1), 20, "kept while nobody needs the room");
  assert(pool.growAll(2, 16));
  // Now to 28 tokens (28 blocks, 12 more, 4 free): 8 blocks must go, two of its layers' four
  // landed blocks; the layers' newest block (not on the host) stays.
  assertEquals(cache.evictFor(needy, 28), true);
  assertEquals(cache.stats.layersEvicted, 2, "the fewest layers that make the room");
  assertEquals(pool.heldBy(1), 12);
  const tables = [0, 1, 2, 3].map((l) => pool.table(1, l).filter((b) => b === OFFLOADED).length);
  assertEquals(tables, [0, 0, 4, 4]);
  assert(pool.growAll(2, 28));
  assertEquals(cache.evictFor(needy, 28), false, "room enough: nothing more taken");

  // The running request ends; the held one resumes: only its two taken layers come back.
  pool.release(2);
  assert(cache.resume(paused, 21));
  assertEquals(cache.stats.blocksRestored, 8);
  assertEquals([0, 1, 2, 3].map((l) => pool.marked(1, l, OFFLOADED)), [0, 0, 0, 0]);
  const copies = tier.take().copies;
  assertEquals(copies.map((c) => [c.direction, c.layer, c.deviceBlocks.length]), [
    ["in", 2, 4],
    ["in", 3, 4],
  ]);
  assertEquals(cache.holds(paused), false, "resumed: no longer held");
  pool.release(1);
  tier.release(paused);
  assertEquals([pool.used, tier.pool.used], [0, 0]);
});

Deno.test("removable cache: with no landed host copy, layers are copied out on demand, the fewest that make the room", () => {
  // 24 blocks: the held request has 4 layers × 4 blocks (16 tokens), none on the host. A running
  // request grows to 12 tokens a layer (12 blocks, 8 free): 4 must go, one layer, copied out first.
  const pool = onePool(LAYERS, 24, B);
  const tier = new HostTier(pool, 100);
  const cache = new RemovableCache(pool, tier);
  const paused = held(pool, tier, 1, 16, 0);
  cache.hold(paused);
  const needy = testRequest(2, { ids: [1, 2, 3], maxTokens: 40 });
  assertEquals(cache.evictFor(needy, 12), true);
  assertEquals(
    [cache.stats.layersEvicted, cache.stats.blocksCopiedOut, cache.stats.dropped],
    [1, 4, 0],
  );
  assertEquals([pool.heldBy(1), paused.computed], [12, 16], "kept its other layers and its KV");
  assertEquals([0, 1, 2, 3].map((l) => pool.marked(1, l, OFFLOADED)), [0, 0, 0, 4]);
  // The copy out runs before the step's kernels, so the blocks are the needy request's at once.
  const out = tier.take().copies;
  assertEquals(out.map((c) => [c.direction, c.layer, c.deviceBlocks.length]), [["out", 3, 4]]);
  assert(pool.growAll(2, 12));
  // It resumes once the room is back: the one layer taken comes back from the host, no more.
  pool.release(2);
  assert(cache.resume(paused, 17));
  assertEquals(cache.stats.blocksRestored, 4);
  const back = tier.take().copies;
  assertEquals(back.map((c) => [c.direction, c.layer, c.deviceBlocks.length]), [["in", 3, 4]]);
  assertEquals(back[0].hostBlocks, out[0].hostBlocks, "read from where the copy out put it");
  pool.release(1);
  tier.release(paused);
  assertEquals([pool.used, tier.pool.used], [0, 0]);
});

Deno.test("removable cache: with the host full, a held request is dropped whole when room is claimed", () => {
  const pool = onePool(LAYERS, 24, B);
  const tier = new HostTier(pool, 0);
  const cache = new RemovableCache(pool, tier);
  const paused = held(pool, tier, 1, 16, 0); // 16 blocks, none on the host, no room there
  cache.hold(paused);
  const needy = testRequest(2, { ids: [1, 2, 3], maxTokens: 40 });
  assertEquals(cache.evictFor(needy, 12), true);
  assertEquals([pool.heldBy(1), paused.computed, cache.stats.dropped], [0, 0, 1]);
  assertEquals(cache.holds(paused), false);
  assertEquals(tier.pool.used, 0);
});

Deno.test("removable cache, baseline (copyOnDemand false): with no landed host copy, a held request is dropped whole", () => {
  const pool = onePool(LAYERS, 24, B);
  const tier = new HostTier(pool, 100);
  const cache = new RemovableCache(pool, tier, false);
  const paused = held(pool, tier, 1, 16, 0); // 16 blocks, none on the host
  cache.hold(paused);
  const needy = testRequest(2, { ids: [1, 2, 3], maxTokens: 40 });
  assertEquals(cache.evictFor(needy, 12), true);
  assertEquals([pool.heldBy(1), paused.computed, cache.stats.dropped], [0, 0, 1]);
  assertEquals(cache.holds(paused), false);
  assertEquals(tier.pool.used, 0);
});
