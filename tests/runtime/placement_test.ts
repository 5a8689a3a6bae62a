// Placement (runtime/placement.ts): each step gives running requests the distance asked for (a
// planner's before a uniform one); layer-wise admission grows a request that does not fit whole
// at the largest distance whose blocks are free, keeps at least that distance while it prefills,
// and stops its blocks being offered to the prefix cache.

import { BlockPool } from "../../runtime/kv/block_pool.ts";
import { HostTier } from "../../runtime/kv/host_tier.ts";
import { Offloader } from "../../runtime/kv/offload.ts";
import { PrefixIndex } from "../../runtime/kv/prefix_index.ts";
import { Placement } from "../../runtime/placement.ts";
import { PrefixCache } from "../../runtime/prefix_cache.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { testRequest } from "../helpers/requests.ts";

/** 4 layers of one arena, blocks of 4 positions, a 4-block region; steps of 8 rows. */
function setup(blocks: number, options: ConstructorParameters<typeof Placement>[3] = {}) {
  const pool = new BlockPool({ blocksPerArena: [blocks], layerArena: [0, 0, 0, 0], blockSize: 4 });
  const offloader = new Offloader(pool, new HostTier(pool, 64), 4);
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

Deno.test("placement: layer-wise admission at the largest distance that fits, held while it prefills", () => {
  // 4 blocks of region; 28 left: a 40-token prompt (10 blocks a layer, 40 in all) does not fit.
  const { pool, offloader, cache, placement } = setup(32, { layerwisePrefill: true });
  const req = testRequest(1, { ids: Array.from({ length: 40 }, (_, i) => i) });
  assert(!pool.canGrowAll(req.id, 40));
  // Distance 4 (one layer offloaded): 3 × 10 + 2 blocks for its first chunk of 8 = 32 > 28;
  // distance 2 (two layers): 2 × 10 + 2 × 2 = 24 fits.
  const d = placement.growLayerwise(req, [], 40);
  assertEquals(d, 2);
  assertEquals([0, 1, 2, 3].map((l) => pool.table(req.id, l).length), [10, 2, 10, 2]);
  req.admit(0, 0, 0);
  cache.admitted(req, []);
  placement.admittedLayerwise(req, d);
  assertEquals([offloader.distanceOf(req), placement.layerwiseAdmissions], [2, 1]);
  // Its blocks are not offered to the prefix cache now.
  req.computeTo(8);
  cache.offer(req);
  assertEquals(cache.stats().entries, 0);
  // While it prefills nothing asks for less offloading; once it decodes, distance 0 takes over.
  placement.beforeStep([req]);
  assertEquals(offloader.distanceOf(req), 2);
  req.startDecoding();
  placement.beforeStep([req]);
  assertEquals(offloader.distanceOf(req), 0);
  // Off, or a prompt one chunk holds: no layer-wise admission.
  const off = setup(32);
  assertEquals(off.placement.growLayerwise(testRequest(2, { ids: [1] }), [], 40), 0);
  assertEquals(placement.growLayerwise(testRequest(3, { ids: [1, 2, 3] }), [], 3), 0);
});
