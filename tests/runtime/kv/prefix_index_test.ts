// PrefixIndex over the block pool: evicting an entry whose layers are partly held, and moving what
// the device evicts to the host tier and back (the host giving it up before refusing anyone).

import { OFFLOADED } from "../../../runtime/kv/offload.ts";
import { PrefixIndex, type PrefixMover } from "../../../runtime/kv/prefix_index.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { onePool } from "../../helpers/pools.ts";

Deno.test("the prefix index can evict an entry some of whose layers are still held (an offloaded layer's idle block)", () => {
  const pool = onePool(2, 4, 4);
  const index = new PrefixIndex(pool);
  pool.growAll("a", 4); // one block per layer
  const tokens = [1, 2, 3, 4];
  index.insert(null, tokens, [pool.table("a", 0)[0], pool.table("a", 1)[0]]);
  pool.vacate("a", 1, 0, 1, OFFLOADED); // layer 1's block is idle (cached), layer 0's still held
  assertEquals([pool.freeIn(0), pool.availableIn(0)], [2, 3]);
  // Needing all available blocks reclaims the idle one by evicting the entry.
  pool.growAll("b", 4);
  assertEquals(pool.grow("c", 0, 4)!.length, 1);
  assertEquals(index.stats().evictions, 1);
  assertEquals(pool.table("a", 0).length, 1, "the held block stays with its holder");
  for (const s of ["a", "b", "c"]) pool.release(s);
  assertEquals(pool.used, 0);
});

Deno.test("the prefix index moves what the device evicts to the host tier and back, and the host gives it up before refusing anyone", () => {
  const device = onePool(2, 4, 4);
  const host = onePool(2, 4, 4);
  const index = new PrefixIndex(device);
  const moves: string[] = [];
  const mover: PrefixMover = {
    copyOut: (_, d, copy) => moves.push(`out ${d} to ${copy.blocks}`),
    copyIn: (e, d) => moves.push(`in ${e.host!.blocks} to ${d}`),
    // Nothing is queued here: there is never a copy to cancel.
    cancelIn: () => {},
    cancelOut: () => {},
  };
  index.attachHost(host, mover);
  const tokens = [1, 2, 3, 4];
  device.growAll("a", 4);
  const entry = index.insert(null, tokens, [device.table("a", 0)[0], device.table("a", 1)[0]]);
  device.release("a");
  // "b" needs the whole device: the idle entry moves to the host instead of being dropped.
  assert(device.growAll("b", 8));
  assertEquals(moves, ["out 0,1 to 0,1"]);
  assertEquals([entry.blocks, entry.host?.blocks, entry.host?.landed], [null, [0, 1], false]);
  assertEquals([host.used, host.idle], [2, 2]);
  device.release("b");
  // A lookup before the copy has landed misses; after, it copies the block back into its own.
  assertEquals(index.acquire("c", [...tokens, 9], 1), []);
  entry.host!.landed = true;
  assertEquals(index.acquire("c", [...tokens, 9], 1), [entry]);
  assertEquals([0, 1].map((layer) => device.table("c", layer)[0]), entry.blocks);
  assertEquals(moves.at(-1), `in 0,1 to ${entry.blocks}`);
  // Its host copy stays: evicted from the device again, it moves nothing.
  device.release("c");
  assert(device.growAll("d", 8));
  assertEquals([entry.blocks, moves.length], [null, 2]);
  device.release("d");
  // A swap that needs the whole host tier takes the cached copy; the entry is dropped.
  assert(host.growAll("swap", 8));
  assertEquals([entry.evicted, index.stats().entries], [true, 0]);
  host.release("swap");
  assertEquals(index.stats(), {
    entries: 0,
    hitBlocks: 1,
    hostHitBlocks: 1,
    lookupBlocks: 2,
    evictions: 1,
    demotions: 1,
    deviceBlocks: 0,
    hostBlocks: 0,
  });
  assertEquals([device.used, host.used], [0, 0]);
});
