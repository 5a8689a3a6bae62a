// PrefixCache (runtime/prefix_cache.ts): a running request offers its full, computed blocks in
// order; a request with the same leading tokens shares them at admission (never its last
// position's); a request whose tokens another cached first, or whose blocks are no longer its own,
// caches no more.

import { BlockPool } from "../../runtime/kv/block_pool.ts";
import { PrefixIndex } from "../../runtime/kv/prefix_index.ts";
import { PrefixCache } from "../../runtime/prefix_cache.ts";
import { assertEquals } from "../helpers/testing.ts";
import { testRequest } from "../helpers/requests.ts";

function setup() {
  const pool = new BlockPool({ blocksPerArena: [32], layerArena: [0, 0], blockSize: 2 });
  const index = new PrefixIndex(pool);
  return { pool, index, cache: new PrefixCache(index, pool) };
}

/** Admits a request for `ids` with whatever the cache shares, its KV computed up to `computed`. */
function run(s: ReturnType<typeof setup>, id: number, ids: number[], computed: number) {
  const req = testRequest(id, { ids });
  const entries = s.cache.share(req);
  s.pool.growAll(req.id, ids.length);
  req.admit(0, id, Math.min(entries.length * 2, ids.length - 1));
  s.cache.admitted(req, entries);
  req.computeTo(computed);
  s.cache.offer(req);
  return { req, entries };
}

Deno.test("prefix cache: full computed blocks are offered in order and shared by the next request", () => {
  const s = setup();
  const a = run(s, 1, [1, 2, 3, 4, 5], 5);
  assertEquals(s.cache.stats().entries, 2, "two full blocks; the fifth position's is partial");
  // The same prompt: both blocks shared, the last position computed again.
  const b = run(s, 2, [1, 2, 3, 4, 5], 5);
  assertEquals(b.entries.length, 2);
  assertEquals(s.pool.table(2, 0).slice(0, 2), s.pool.table(1, 0).slice(0, 2));
  assertEquals(b.req.computed, 5);
  // Four tokens: only one block may be shared (its last position must be computed).
  const c = run(s, 3, [1, 2, 3, 4], 4);
  assertEquals(c.entries.length, 1);
  assertEquals(a.req.id, 1);
  assertEquals(s.cache.stats().hitBlocks, 3);
});

Deno.test("prefix cache: a request whose tokens another cached first, or that was stopped, caches no more", () => {
  const s = setup();
  run(s, 1, [1, 2, 3, 4], 2);
  // Request 2 computed the same first block in blocks of its own: it is not chained after it.
  const other = testRequest(2, { ids: [1, 2, 3, 4, 7, 8] });
  s.pool.growAll(other.id, 6);
  other.admit(1, 2, 0);
  s.cache.admitted(other, []);
  other.computeTo(6);
  s.cache.offer(other);
  assertEquals(s.cache.stats().entries, 1);
  const stopped = testRequest(3, { ids: [9, 9, 9, 9] });
  s.pool.growAll(stopped.id, 4);
  stopped.admit(2, 3, 0);
  s.cache.admitted(stopped, []);
  s.cache.stop(stopped);
  stopped.computeTo(4);
  s.cache.offer(stopped);
  assertEquals(s.cache.stats().entries, 1);
});
