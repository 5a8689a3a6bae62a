// Placement (runtime/placement.ts): each step gives running requests the distance asked for (a
// planner's before a uniform one); layer-wise prefill grows every admission at its layer split
// (without a cost model: the most layers kept that fit), keeps at least that distance while it
// prefills, and stops its blocks being offered to the prefix cache; a split refused makes the
// Eq. 5 forecast short, and the newest requests' kept layers go to the host, x/2 then x.

import { BlockPool } from "../../runtime/kv/block_pool.ts";
import { HostTier } from "../../runtime/kv/host_tier.ts";
import { Offloader } from "../../runtime/kv/offload.ts";
import { PrefixIndex } from "../../runtime/kv/prefix_index.ts";
import { Placement } from "../../runtime/placement.ts";
import { policyContext } from "../../runtime/policy/context.ts";
import { PrefixCache } from "../../runtime/prefix_cache.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { testRequest } from "../helpers/requests.ts";

/** 4 layers of one arena, blocks of 4 positions, a 4-block region; steps of 8 rows. */
function setup(
  blocks: number,
  options: ConstructorParameters<typeof Placement>[3] = {},
  region = 4,
) {
  const pool = new BlockPool({ blocksPerArena: [blocks], layerArena: [0, 0, 0, 0], blockSize: 4 });
  const offloader = new Offloader(pool, new HostTier(pool, 64), region);
  const cache = new PrefixCache(new PrefixIndex(pool), pool);
  return { pool, offloader, cache, placement: new Placement(pool, offloader, 8, options, cache) };
}

Deno.test("placement: a uniform distance, or a planner's, is given to every running request", () => {
  const { pool, offloader, placement } = setup(64, { distance: () => 2 });
  const req = testRequest(1, { ids: Array.from({ length: 8 }, (_, i) => i) });
  pool.growAll(req.id, 8);
  req.admit(0, 0, 8);
  placement.beforeStep([req]);
  assertEquals(offloader.distanceOf(req), 2);
  assert(placement.offloads(req));
  const planned = setup(64, {
    distance: () => 2,
    planner: { beforeStep: () => {}, distanceOf: () => 4, feasible: () => false },
  });
  planned.pool.growAll(req.id, 8);
  planned.placement.beforeStep([req]);
  assertEquals(planned.offloader.distanceOf(req), 4);
  assertEquals(planned.placement.feasible, false);
  placement.forget(req, false);
  assertEquals(offloader.distanceOf(req), 0);
});

/** What the policies read, over `pool`, with no cost model. */
function contextOf(pool: BlockPool) {
  return policyContext({
    now: () => 0,
    maxSlots: 4,
    freeSlots: () => 4,
    maxRows: 8,
    pool,
    hostTier: true,
    costModel: () => undefined,
    kvBlockBytes: 0,
  });
}

Deno.test("placement: layer-wise prefill splits at the fewest offloaded layers that fit, held while it prefills", () => {
  // A 16-block region; 60 left: a 64-token prompt (16 blocks a layer, 64 in all) does not fit.
  const { pool, offloader, cache, placement } = setup(76, { layerwisePrefill: true }, 16);
  const ctx = contextOf(pool);
  const req = testRequest(1, { ids: Array.from({ length: 64 }, (_, i) => i) });
  assert(!pool.canGrowAll(req.id, 64));
  // An offloaded layer is counted at its copies in flight, 3 chunks of 2 blocks and a partial
  // one: 9 blocks. Distance 4 (layer 3 offloaded): 3 × 16 + 9 = 57 ≤ 60. It is grown for its
  // first chunk of 8 positions (2 blocks).
  const d = placement.growSplit(req, [], 64, [], ctx);
  assertEquals(d, 4);
  assertEquals(placement.prefillSplits, 1);
  assertEquals(placement.splitOf(req), 3);
  assertEquals([0, 1, 2, 3].map((l) => pool.table(req.id, l).length), [16, 16, 16, 2]);
  req.admit(0, 0, 0);
  cache.admitted(req, []);
  placement.admittedLayerwise(req, d!);
  assertEquals([offloader.distanceOf(req), placement.layerwiseAdmissions], [4, 1]);
  // Its blocks are not offered to the prefix cache now.
  req.computeTo(8);
  cache.offer(req);
  assertEquals(cache.stats().entries, 0);
  // While it prefills nothing asks for less offloading; once it decodes with room to spare, its
  // offloaded layer comes back.
  placement.beforeStep([req]);
  assertEquals(offloader.distanceOf(req), 4);
  req.startDecoding();
  placement.beforeStep([req]);
  assertEquals(offloader.distanceOf(req), 0);
  // A prompt one chunk holds, with room: split whole.
  const small = testRequest(3, { ids: [1, 2, 3] });
  assertEquals(placement.growSplit(small, [], 3, [], ctx), 0);
  assertEquals(placement.splitOf(small), 4);
  assertEquals(placement.prefillSplits, 2);
});

Deno.test("placement: a refused split makes the Eq. 5 forecast short: the newest requests' kept layers go to the host, x/2 then x", () => {
  const { pool, offloader, placement } = setup(76, { layerwisePrefill: true }, 16);
  const ctx = contextOf(pool);
  // Two decoding requests of 24 positions (6 blocks a layer, 24 in all), admitted in turn, each
  // to write 4 more: 12 of 60 blocks free.
  const [a, c] = [1, 2].map((id, order) => {
    const r = testRequest(id, { ids: Array.from({ length: 24 }, (_, i) => i), maxTokens: 4 });
    pool.growAll(r.id, 24);
    r.admit(order, order, 0);
    r.computeTo(24);
    r.startDecoding();
    return r;
  });
  // A 64-token prompt (16 blocks a layer): even all 4 layers offloaded (4 × 9 = 36) do not fit.
  const b = testRequest(3, { ids: Array.from({ length: 64 }, (_, i) => i) });
  assertEquals(placement.growSplit(b, [], 64, [a, c], ctx), null);
  // The forecast: each takes a block a layer at once (12 − 8 = 4 lowest), 32 short of the 36 the
  // split needs. Half of c's 4 layers (12 blocks), half of a's (12), then c's other 2 (12): 36.
  placement.beforeStep([a, c]);
  assertEquals([offloader.distanceOf(c), offloader.distanceOf(a)], [1, 2]);
  assertEquals(placement.reliefLayers, 6);
  // Their copies have not landed, but the blocks leaving count as free: nothing more goes, and
  // nothing comes back, however often it is asked.
  assertEquals(placement.growSplit(b, [], 64, [a, c], ctx), null);
  placement.beforeStep([a, c]);
  assertEquals([offloader.distanceOf(c), offloader.distanceOf(a), placement.reliefLayers], [
    1,
    2,
    6,
  ]);
  // Once nobody waits, the forecast has room to spare (48 free or leaving, 8 of growth) for the
  // 36 blocks they offloaded: their layers stay on the device after all, once they have settled
  // (8 steps where the rule put them: moving them back at once would only spend the link).
  for (let i = 0; i < 6; i++) placement.beforeStep([a, c]);
  assertEquals([offloader.distanceOf(c), offloader.distanceOf(a)], [1, 2]);
  placement.beforeStep([a, c]);
  assertEquals([offloader.distanceOf(c), offloader.distanceOf(a)], [0, 0]);
});
