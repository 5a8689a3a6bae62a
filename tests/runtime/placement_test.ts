// Placement (runtime/placement.ts): each step gives running requests the distance asked for (a
// planner's before a uniform one); layer-wise prefill grows every admission at its layer split
// (the fewest layers offloaded that fit beside the Eq. 5 forecast), keeps at least that distance
// while it prefills, and stops its blocks being offered to the prefix cache.

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
  // While it prefills nothing asks for less offloading; once it decodes, distance 0 takes over.
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

Deno.test("placement: the Eq. 5 forecast of a running request's growth makes a split offload more, or wait", () => {
  const { pool, placement } = setup(76, { layerwisePrefill: true }, 16);
  const ctx = contextOf(pool);
  // A running request holds 4 blocks (4 positions a layer) and will write 8 more: 2 more blocks
  // a layer, 8 in all, before it finishes. 56 free, 48 once it has grown.
  const running = testRequest(1, { ids: [1, 2, 3, 4], maxTokens: 8 });
  pool.growAll(running.id, 4);
  running.admit(0, 0, 0);
  // A 52-token prompt (13 blocks a layer): whole it needs 52 ≤ 56 but > 48: one layer offloaded
  // (9 blocks) needs 3 × 13 + 9 = 48.
  const req = testRequest(2, { ids: Array.from({ length: 52 }, (_, i) => i) });
  assertEquals(placement.growSplit(req, [], 52, [running], ctx), 4);
  assertEquals(placement.splitOf(req), 3);
  pool.release(req.id);
  // A 64-token prompt (16 blocks a layer): 2 offloaded (2 × 16 + 2 × 9 = 50) do not fit 48,
  // 4 (4 × 9 = 36) do.
  const long = testRequest(3, { ids: Array.from({ length: 64 }, (_, i) => i) });
  assertEquals(placement.growSplit(long, [], 64, [running], ctx), 1);
  assertEquals(placement.splitOf(long), 0);
  pool.release(long.id);
  // Without the running request's growth counted, 2 offloaded fit 56.
  assertEquals(placement.growSplit(long, [], 64, [], ctx), 2);
  pool.release(long.id);
  // A second running request that will write 48 more positions (12 blocks a layer): 52 free, 8
  // left after both have grown: no split fits, and nothing is grown.
  const big = testRequest(4, { ids: [1, 2, 3, 4], maxTokens: 48 });
  pool.growAll(big.id, 4);
  big.admit(1, 1, 0);
  assertEquals(placement.growSplit(long, [], 64, [running, big], ctx), null);
  assertEquals(pool.heldBy(long.id), 0);
  assertEquals(placement.prefillSplits, 3);
});
