// BlockPool: the KV pool shared by every layer (pure host logic): allocation, growth, release and
// contiguity; one free list per arena shared by that arena's layers; growAll's all-or-nothing;
// double frees; and a property test over random operation sequences.

import { BlockPool, type SeqId } from "../../../runtime/kv/block_pool.ts";
import type { FreeBlocks } from "../../../runtime/kv/block_runs.ts";
import { OFFLOADED } from "../../../runtime/kv/offload.ts";
import type { PoolShape } from "../../../engine/kv/pool_shape.ts";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";
import { rng, testSeed } from "../../helpers/random.ts";
import { onePool } from "../../helpers/pools.ts";

/** Every block id `seqs` hold, per arena, with its holder; throws on a block held twice. */
function holders(pool: BlockPool, seqs: Iterable<SeqId>): Map<number, string>[] {
  const held = Array.from({ length: pool.numArenas }, () => new Map<number, string>());
  for (const s of seqs) {
    for (let layer = 0; layer < pool.numLayers; layer++) {
      const arena = pool.layerArena[layer];
      for (const b of pool.table(s, layer)) {
        const size = pool.shape.blocksPerArena[arena];
        assert(Number.isInteger(b) && b >= 0 && b < size, `block ${b} outside arena ${arena}`);
        const other = held[arena].get(b);
        assert(
          other === undefined,
          `block ${b} of arena ${arena} held by ${other} and (${s}, ${layer})`,
        );
        held[arena].set(b, `(${s}, ${layer})`);
      }
    }
  }
  return held;
}

/**
 * The pool's invariants, over every request that may hold blocks: no block held twice, free +
 * held = total per arena, used/heldBy/sequences agree with the tables, and the free map agrees with
 * the counts (probed by taking every free block of each arena and giving them back).
 */
function checkConsistent(pool: BlockPool, seqs: Iterable<SeqId>): void {
  const all = [...seqs];
  const held = holders(pool, all);
  let used = 0;
  for (let a = 0; a < pool.numArenas; a++) {
    assertEquals(
      pool.freeIn(a) + held[a].size,
      pool.shape.blocksPerArena[a],
      `arena ${a}: free + held`,
    );
    used += held[a].size;
  }
  assertEquals(pool.used, used, "used");
  assertEquals(pool.total, pool.shape.blocksPerArena.reduce((x, y) => x + y, 0), "total");
  for (const s of all) {
    let n = 0;
    for (let layer = 0; layer < pool.numLayers; layer++) n += pool.table(s, layer).length;
    assertEquals(pool.heldBy(s), n, `heldBy(${s})`);
  }
  const holding = all.filter((s) => pool.heldBy(s) > 0).map(String).sort();
  assertEquals(pool.sequences().map(String).sort(), holding, "sequences() = requests holding");
  // The free map: a probe takes each arena's free blocks; they must be exactly the unheld ones.
  const probe = "\u0000probe";
  for (let a = 0; a < pool.numArenas; a++) {
    const free = pool.freeIn(a);
    const layer = pool.layerArena.indexOf(a);
    if (layer < 0 || free === 0) continue;
    const got = pool.grow(probe, layer, free * pool.blockSize);
    assert(got !== null, `arena ${a}: ${free} free blocks could not be taken`);
    const want = [];
    for (let b = 0; b < pool.shape.blocksPerArena[a]; b++) if (!held[a].has(b)) want.push(b);
    assertEquals([...got].sort((x, y) => x - y), want, `arena ${a}: free map`);
    assertEquals(pool.releaseLayer(probe, layer), free);
  }
}

Deno.test("blocksFor rounds up to whole blocks", () => {
  const pool = onePool(1, 8, 16);
  assertEquals([0, 1, 16, 17, 32, 33].map((t) => pool.blocksFor(t)), [0, 1, 1, 2, 2, 3]);
  assertEquals([0, 1, 3, 4, 5].map((t) => onePool(1, 8, 3).blocksFor(t)), [0, 1, 1, 2, 2]);
});

Deno.test("the pool's shape: arenas, layers, totals", () => {
  const pool = new BlockPool({ blocksPerArena: [10, 6], layerArena: [0, 0, 1], blockSize: 4 });
  assertEquals(pool.numArenas, 2);
  assertEquals(pool.numLayers, 3);
  assertEquals(pool.blockSize, 4);
  assertEquals(pool.total, 16);
  assertEquals(pool.used, 0);
  assertEquals([pool.freeIn(0), pool.freeIn(1)], [10, 6]);
  pool.grow("a", 0, 9); // 3 blocks of arena 0
  pool.grow("a", 2, 4); // 1 block of arena 1
  assertEquals(pool.used, 4);
  assertEquals(pool.heldBy("a"), 4);
  assertEquals(pool.heldBy("nobody"), 0);
  assertEquals([pool.freeIn(0), pool.freeIn(1)], [7, 5]);
  checkConsistent(pool, ["a"]);
});

Deno.test("fresh allocations take the lowest-addressed run that fits", () => {
  const pool = onePool(1, 16, 4);
  assertEquals(pool.grow("a", 0, 12), [0, 1, 2]);
  assertEquals(pool.grow("b", 0, 8), [3, 4]);
  assertEquals(pool.grow("c", 0, 16), [5, 6, 7, 8]);
  pool.release("b"); // hole of 2 at 3..4
  assertEquals(pool.grow("d", 0, 12), [9, 10, 11], "3 blocks skip the 2-block hole");
  assertEquals(pool.grow("e", 0, 8), [3, 4], "2 blocks fill the hole");
  assertEquals(pool.runsOf("d", 0), 1);
  checkConsistent(pool, ["a", "b", "c", "d", "e"]);
});

Deno.test("a growing table extends its last block in place while the next blocks are free", () => {
  const pool = onePool(1, 16, 4);
  assertEquals(pool.grow("a", 0, 4), [0]);
  assertEquals(pool.grow("a", 0, 5), [1]);
  assertEquals(pool.grow("a", 0, 8), [], "still within two blocks");
  assertEquals(pool.grow("a", 0, 3), [], "shrinking is not growing");
  assertEquals(pool.grow("a", 0, 16), [2, 3]);
  assertEquals(pool.runsOf("a", 0), 1);
  // Another request right behind it: a's next growth must jump, and then continue contiguously.
  assertEquals(pool.grow("b", 0, 4), [4]);
  assertEquals(pool.grow("a", 0, 24), [5, 6]);
  assertEquals(pool.table("a", 0), [0, 1, 2, 3, 5, 6]);
  assertEquals(pool.runsOf("a", 0), 2);
  assertEquals(pool.grow("a", 0, 28), [7], "continues after its new last block");
  assertEquals(pool.runsOf("a", 0), 2);
  checkConsistent(pool, ["a", "b"]);
});

Deno.test("when no run is large enough, the largest runs are used first", () => {
  const pool = onePool(1, 12, 1);
  // Free pattern after releases: holes of 1 (0), 3 (2..4), 2 (6..7).
  for (let i = 0; i < 12; i++) pool.grow(i, 0, 1);
  for (const i of [0, 2, 3, 4, 6, 7]) pool.release(i);
  assertEquals(pool.grow("x", 0, 5), [2, 3, 4, 6, 7]);
  assertEquals(pool.runsOf("x", 0), 2);
  assertEquals(pool.freeIn(0), 1);
  checkConsistent(pool, ["x", ...Array.from({ length: 12 }, (_, i) => i)]);
});

Deno.test("exhaustion returns null and changes nothing", () => {
  const pool = onePool(2, 6, 4);
  assertEquals(pool.grow("a", 0, 12), [0, 1, 2]);
  assertEquals(pool.grow("b", 0, 8), [3, 4]);
  const before = { a: pool.table("a", 0), b: pool.table("b", 0), used: pool.used };
  assertEquals(pool.grow("b", 0, 20), null, "needs 3 more, 1 free");
  assertEquals(pool.grow("c", 1, 8), null, "a new request that does not fit, on another layer");
  assertEquals(pool.table("b", 0), before.b);
  assertEquals(pool.table("a", 0), before.a);
  assertEquals(pool.used, before.used);
  assertEquals(pool.table("c", 1), []);
  assertEquals(pool.sequences().sort(), ["a", "b"]);
  assertEquals(pool.grow("b", 1, 4), [5], "the last block still fits, on either layer");
  assertEquals(pool.grow("a", 0, 13), null);
  checkConsistent(pool, ["a", "b", "c"]);
});

Deno.test("the layers of one arena draw from one free list", () => {
  const pool = onePool(3, 6, 2);
  assertEquals(pool.grow("a", 0, 8), [0, 1, 2, 3]);
  assertEquals(pool.grow("a", 1, 8), null, "layer 1 wants 4, the arena has 2 left");
  assertEquals(pool.grow("a", 1, 4), [4, 5], "layer 1 takes what layer 0 left");
  assertEquals(pool.grow("b", 2, 1), null, "nothing left for any layer");
  // Freeing one layer's blocks lets another layer (of this or another request) use them.
  assertEquals(pool.releaseLayer("a", 0), 4);
  assertEquals(pool.table("a", 0), []);
  assertEquals(pool.table("a", 1), [4, 5], "the other layer keeps its blocks");
  assertEquals(pool.grow("b", 2, 6), [0, 1, 2]);
  assertEquals(pool.grow("a", 0, 2), [3]);
  assertEquals(pool.freeIn(0), 0);
  // A finished request's blocks, whichever layers held them, go to whichever layer asks next.
  assertEquals(pool.release("a"), 3);
  assertEquals(pool.grow("b", 2, 12), [3, 4, 5], "b's layer 2 extends over a's old blocks");
  assertEquals(pool.runsOf("b", 2), 1);
  assertEquals(pool.sequences(), ["b"], "a request with no blocks left is forgotten");
  checkConsistent(pool, ["a", "b"]);
});

Deno.test("arenas are independent", () => {
  const pool = new BlockPool({ blocksPerArena: [4, 3], layerArena: [0, 1, 0, 1], blockSize: 1 });
  // Block ids are per arena: both arenas hand out block 0.
  assertEquals(pool.grow("a", 0, 3), [0, 1, 2]);
  assertEquals(pool.grow("a", 1, 2), [0, 1]);
  assertEquals(pool.grow("a", 2, 1), [3], "layer 2 shares arena 0 with layer 0");
  assertEquals(pool.grow("a", 3, 1), [2], "layer 3 shares arena 1 with layer 1");
  assertEquals([pool.freeIn(0), pool.freeIn(1)], [0, 0]);
  // Room in arena 1 does not help a layer of arena 0.
  assertEquals(pool.releaseLayer("a", 1), 2);
  assertEquals([pool.freeIn(0), pool.freeIn(1)], [0, 2]);
  assertEquals(pool.grow("b", 0, 1), null);
  assertEquals(pool.grow("b", 2, 1), null);
  assertEquals(pool.grow("b", 3, 2), [0, 1]);
  // And the other way round.
  assertEquals(pool.releaseLayer("a", 0), 3);
  assertEquals(pool.grow("b", 1, 1), null, "arena 1 is full again");
  assertEquals(pool.grow("b", 2, 3), [0, 1, 2]);
  checkConsistent(pool, ["a", "b"]);
});

Deno.test("growAll is all-or-nothing across arenas", () => {
  const pool = new BlockPool({ blocksPerArena: [6, 2], layerArena: [0, 0, 1], blockSize: 4 });
  assertEquals(pool.shortfall("a", 4), [2, 1]);
  assert(pool.canGrowAll("a", 4));
  assertEquals(pool.growAll("a", 4), [[0], [1], [0]]);
  assertEquals(pool.shortfall("a", 4), [0, 0]);
  assertEquals(pool.growAll("a", 3), [[], [], []], "already holds enough");
  assertEquals([pool.freeIn(0), pool.freeIn(1)], [4, 1]);
  // Arena 0 has room for b's two layers there, arena 1 not for its third: nothing happens.
  assertEquals(pool.shortfall("b", 8), [4, 2]);
  assert(!pool.canGrowAll("b", 8));
  assertEquals(pool.growAll("b", 8), null);
  assertEquals(pool.heldBy("b"), 0);
  assertEquals(pool.sequences(), ["a"]);
  assertEquals([pool.freeIn(0), pool.freeIn(1)], [4, 1]);
  assertEquals(pool.growAll("b", 4), [[2], [3], [1]]);
  // Growing a request that holds blocks: refused as a whole too.
  const tables = () => [0, 1, 2].map((l) => pool.table("a", l));
  const before = tables();
  assertEquals(pool.growAll("a", 8), null, "arena 1 is full");
  assertEquals(tables(), before);
  assertEquals([pool.freeIn(0), pool.freeIn(1)], [2, 0]);
  // Arena 1 has room, arena 0 not: nothing happens either.
  assertEquals(pool.release("b"), 3);
  assertEquals(pool.grow("c", 0, 12), [2, 3, 4]);
  assertEquals([pool.freeIn(0), pool.freeIn(1)], [1, 1]);
  assertEquals(pool.shortfall("a", 8), [2, 1]);
  assertEquals(pool.growAll("a", 8), null, "arena 0 has 1 free, 2 wanted");
  assertEquals(tables(), before);
  assertEquals([pool.freeIn(0), pool.freeIn(1)], [1, 1]);
  // Room again: every layer grows, and layers of one arena interleave in it.
  assertEquals(pool.releaseLayer("c", 0), 3);
  assertEquals(pool.growAll("a", 8), [[2], [3], [1]]);
  assertEquals(tables(), [[0, 2], [1, 3], [0, 1]]);
  // A partial request (layer 1 released) is topped up where it is short only.
  assertEquals(pool.releaseLayer("a", 1), 2);
  assertEquals(pool.shortfall("a", 8), [2, 0]);
  assertEquals(pool.growAll("a", 8), [[], [3, 4], []]);
  assertEquals([pool.freeIn(0), pool.freeIn(1)], [2, 0]);
  checkConsistent(pool, ["a", "b", "c"]);
});

Deno.test("double frees are harmless through the API and detected in the free map", () => {
  const pool = onePool(2, 8, 1);
  pool.growAll("a", 3);
  assertEquals(pool.releaseLayer("a", 0), 3);
  assertEquals(pool.releaseLayer("a", 0), 0, "a released layer holds nothing");
  assertEquals(pool.release("a"), 3);
  assertEquals(pool.release("a"), 0, "a released request holds nothing");
  assertEquals(pool.releaseLayer("a", 1), 0);
  assertEquals(pool.freeIn(0), 8, "nothing counted free twice");
  checkConsistent(pool, ["a"]);

  // A block marked free while a table still holds it (bookkeeping gone wrong) is caught on release.
  pool.growAll("b", 2);
  const freeMap = (pool as unknown as { freeMap: FreeBlocks[] }).freeMap;
  freeMap[0].set(pool.table("b", 1)[1], true);
  assertThrows(() => pool.release("b"), /block 3 of arena 0 freed twice/);
});

Deno.test("offload frees a layer's leading blocks (OFFLOADED, never refilled by grow); restore gives them blocks again", () => {
  const pool = onePool(2, 12, 4);
  pool.growAll("a", 16); // 4 blocks per layer: layer 0 gets 0..3, layer 1 gets 4..7
  assertEquals(pool.vacate("a", 1, 0, 3, OFFLOADED), 3);
  assertEquals(pool.table("a", 1), [OFFLOADED, OFFLOADED, OFFLOADED, 7]);
  assertEquals([pool.marked("a", 1, OFFLOADED), pool.heldBy("a"), pool.used], [3, 5, 5]);
  // Growing counts offloaded entries as covered positions: only the new block is added.
  assertEquals(pool.grow("a", 1, 20), [8]);
  assertEquals(pool.canGrowAll("a", 20), true);
  assertThrows(() => pool.vacate("a", 1, 2, 4, OFFLOADED), /entry 2 of layer 1 holds no block/);
  assertThrows(() => pool.vacate("a", 1, 0, 9, OFFLOADED), /outside a table/);
  const restored = pool.refill("a", 1, OFFLOADED)!;
  assertEquals(restored.map((r) => r.index), [0, 1, 2]);
  assertEquals(pool.table("a", 1), [...restored.map((r) => r.block), 7, 8]);
  assertEquals(pool.marked("a", 1, OFFLOADED), 0);
  // Short of blocks: restore says no and changes nothing.
  pool.vacate("a", 0, 0, 4, OFFLOADED);
  assert(pool.growAll("b", 12)); // 3 blocks per layer: 1 block left free
  assertEquals(pool.freeIn(0), 1);
  assertEquals(pool.refill("a", 0, OFFLOADED), null);
  assertEquals(pool.marked("a", 0, OFFLOADED), 4);
  pool.release("a");
  pool.release("b");
  assertEquals(pool.used, 0);
});

Deno.test("errors are clear", () => {
  const shape = (s: Partial<PoolShape>): PoolShape => ({
    blocksPerArena: [8],
    layerArena: [0, 0],
    blockSize: 16,
    ...s,
  });
  assertThrows(() => new BlockPool(shape({ layerArena: [] })), /numLayers/);
  assertThrows(() => new BlockPool(shape({ blockSize: 0 })), /blockSize/);
  assertThrows(() => new BlockPool(shape({ blocksPerArena: [8, 0] })), /blocks in arena 1/);
  assertThrows(() => new BlockPool(shape({ layerArena: [0, 1] })), /layer arena 1 is out of range/);
  const pool = new BlockPool(shape({}));
  assertThrows(() => pool.grow("a", 2, 1), /layer 2 is out of range 0\.\.1/);
  assertThrows(() => pool.grow("a", 0, -1), /tokens/);
  assertThrows(() => pool.growAll("a", 1.5), /tokens/);
  assertThrows(() => pool.releaseLayer("a", -1), /layer -1/);
  assertThrows(() => pool.table("a", 2), /layer 2/);
  assertThrows(() => pool.freeIn(1), /arena 1 is out of range/);
  assertEquals(pool.release("never"), 0);
  assertEquals(pool.sequences(), []);
});

/** A random pool shape: 1..6 layers over 1..3 arenas (each serving a layer at least). */
function randomShape(next: () => number): PoolShape {
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const numLayers = int(1, 6);
  const numArenas = int(1, Math.min(3, numLayers));
  const layerArena = Array.from(
    { length: numLayers },
    (_, l) => l < numArenas ? l : int(0, numArenas - 1),
  );
  for (let i = layerArena.length - 1; i > 0; i--) {
    const j = int(0, i);
    [layerArena[i], layerArena[j]] = [layerArena[j], layerArena[i]];
  }
  return {
    blocksPerArena: Array.from({ length: numArenas }, () => int(1, 40)),
    layerArena,
    blockSize: int(1, 8),
  };
}

Deno.test("property: random grow / growAll / releaseLayer / release keep the pool sound", () => {
  const seed = testSeed();
  const next = rng(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  const TRIALS = 1500;
  const OPS = 60;
  let refused = 0, granted = 0;
  for (let trial = 0; trial < TRIALS; trial++) {
    const shape = randomShape(next);
    const pool = new BlockPool(shape);
    const L = pool.numLayers, B = shape.blockSize;
    const ids: SeqId[] = Array.from({ length: int(1, 5) }, (_, i) => i % 2 ? i : `r${i}`);
    /** The model: tokens each (request, layer) was last grown to (0 after a release). */
    const tokens = new Map<SeqId, number[]>(ids.map((id) => [id, new Array(L).fill(0)]));
    const tablesOf = () => ids.map((id) => Array.from({ length: L }, (_, l) => pool.table(id, l)));
    const freeOf = () => shape.blocksPerArena.map((_, a) => pool.freeIn(a));
    let op = "";
    try {
      for (let step = 0; step < OPS; step++) {
        const id = ids[int(0, ids.length - 1)];
        const mine = tokens.get(id)!;
        const r = next();
        if (r < 0.4) {
          const layer = int(0, L - 1);
          const want = Math.max(0, mine[layer] + int(-B, 3 * B));
          op = `grow(${id}, ${layer}, ${want})`;
          const had = pool.table(id, layer);
          const arena = shape.layerArena[layer];
          const free = pool.freeIn(arena);
          const heldBefore = holders(pool, ids);
          const last = had.at(-1);
          const nextFree = last !== undefined && last + 1 < shape.blocksPerArena[arena] &&
            !heldBefore[arena].has(last + 1);
          const added = pool.grow(id, layer, want);
          const need = pool.blocksFor(want) - had.length;
          if (added === null) {
            refused++;
            assert(need > free, "grow refused although enough blocks were free");
            assertEquals(pool.table(id, layer), had, "a refused grow changed the table");
            assertEquals(pool.freeIn(arena), free, "a refused grow changed the free count");
          } else {
            granted++;
            assertEquals(added.length, Math.max(0, need));
            assertEquals(pool.table(id, layer), [...had, ...added]);
            for (const b of added) assert(!heldBefore[arena].has(b), `block ${b} was held`);
            if (added.length > 0 && nextFree) {
              assertEquals(added[0], last! + 1, "did not extend its last block in place");
            }
            mine[layer] = Math.max(mine[layer], want);
          }
        } else if (r < 0.7) {
          const want = Math.max(0, Math.max(...mine) + int(-B, 2 * B));
          op = `growAll(${id}, ${want})`;
          const short = pool.shortfall(id, want);
          const free = freeOf();
          const fits = short.every((n, a) => n <= free[a]);
          assertEquals(pool.canGrowAll(id, want), fits, "canGrowAll disagrees with shortfall");
          const before = tablesOf();
          const added = pool.growAll(id, want);
          if (added === null) {
            refused++;
            assert(!fits, "growAll refused although every arena had room");
            assertEquals(tablesOf(), before, "a refused growAll changed a table");
            assertEquals(freeOf(), free, "a refused growAll changed a free count");
          } else {
            granted++;
            assert(fits, "growAll granted although an arena was short");
            assertEquals(added.length, L);
            const mineBefore = before[ids.indexOf(id)];
            for (let l = 0; l < L; l++) {
              assertEquals(pool.table(id, l), [...mineBefore[l], ...added[l]]);
              assertEquals(
                pool.table(id, l).length,
                Math.max(mineBefore[l].length, pool.blocksFor(want)),
              );
              mine[l] = Math.max(mine[l], want);
            }
            assertEquals(freeOf(), free.map((n, a) => n - short[a]), "free after growAll");
            assert(pool.shortfall(id, want).every((n) => n === 0), "shortfall left after growAll");
          }
        } else if (r < 0.9) {
          const layer = int(0, L - 1);
          op = `releaseLayer(${id}, ${layer})`;
          const held = pool.table(id, layer).length;
          const arena = shape.layerArena[layer];
          const free = pool.freeIn(arena);
          assertEquals(pool.releaseLayer(id, layer), held);
          assertEquals(pool.table(id, layer), []);
          assertEquals(pool.freeIn(arena), free + held);
          mine[layer] = 0;
        } else {
          op = `release(${id})`;
          const held = pool.heldBy(id);
          const used = pool.used;
          assertEquals(pool.release(id), held);
          assertEquals(pool.heldBy(id), 0);
          assertEquals(pool.used, used - held);
          assert(!pool.sequences().includes(id));
          mine.fill(0);
        }
        // The model: each table holds exactly the blocks its last growth asked for.
        for (const s of ids) {
          for (let l = 0; l < L; l++) {
            assertEquals(
              pool.table(s, l).length,
              pool.blocksFor(tokens.get(s)![l]),
              `table (${s}, ${l})`,
            );
          }
        }
        checkConsistent(pool, ids);
      }
      op = "release everything";
      for (const id of ids) pool.release(id);
      assertEquals(pool.used, 0);
      assertEquals(pool.sequences(), []);
      assertEquals(freeOf(), shape.blocksPerArena);
      // Empty again means contiguous again: each arena can go whole to one layer, as one run.
      shape.blocksPerArena.forEach((n, a) => {
        const layer = shape.layerArena.indexOf(a);
        assertEquals(pool.grow("all", layer, n * B)?.length, n);
        assertEquals(pool.runsOf("all", layer), 1);
      });
      checkConsistent(pool, ["all"]);
    } catch (e) {
      throw new Error(
        `seed ${seed}, trial ${trial}, ${JSON.stringify(shape)}, after ${op}: ${
          (e as Error).message
        }`,
        { cause: e },
      );
    }
  }
  assert(refused > TRIALS && granted > 10 * TRIALS, `too few refusals (${refused}) or grants`);
});

Deno.test("alias (eLLM): dropped leading entries of every layer share k new blocks, freed once by the last layer's release", () => {
  const pool = onePool(3, 21, 2); // 3 layers, 21 blocks, 2 positions each
  pool.growAll("a", 10); // 5 blocks per layer: 15 used
  assertEquals(pool.dropLeading("a", 3), 9);
  const scratch = pool.alias("a", 2)!;
  assertEquals(scratch.length, 2);
  for (let layer = 0; layer < 3; layer++) {
    const t = pool.table("a", layer);
    assertEquals(t.slice(0, 2), scratch, `layer ${layer}`);
    assertEquals(t[2], -1); // still dropped: grow refills it, after the aliased entries
    for (const b of scratch) assertEquals(pool.holders(layer, b), 3);
  }
  assertEquals(pool.used, 6 + 2);
  const added = pool.growAll("a", 10)!;
  assertEquals(added.map((a) => a.length), [1, 1, 1]);
  for (let layer = 0; layer < 3; layer++) assertEquals(pool.table("a", layer)[2], added[layer][0]);
  assertEquals(pool.used, 6 + 2 + 3);
  assertEquals(pool.release("a"), 11);
  assertEquals(pool.used, 0);
  // Only over dropped entries, and only when the blocks are free.
  pool.growAll("b", 4);
  assertThrows(() => pool.alias("b", 1), Error, "not all dropped");
  pool.growAll("c", 34); // 17 blocks per layer would not fit: nothing taken
  assertEquals(pool.used, 6);
  pool.dropLeading("b", 1);
  pool.growAll("fill", 12); // 6 blocks per layer: the 18 free ones
  assertEquals(pool.alias("b", 1), null);
});

Deno.test("truncate (rejected drafts) frees only the blocks wholly past its tokens, on every layer and arena; growth extends in place again", () => {
  const pool = new BlockPool({ blocksPerArena: [12, 12], layerArena: [0, 1, 0], blockSize: 4 });
  pool.growAll("a", 17); // 5 blocks per layer: positions 0..19
  pool.growAll("b", 4);
  assertEquals(pool.truncate("a", 9), 2 * 3, "positions 0..8 need 3 blocks a layer: 2 go each");
  for (let layer = 0; layer < 3; layer++) assertEquals(pool.table("a", layer).length, 3);
  assertEquals([pool.freeIn(0), pool.freeIn(1)], [12 - 2 * 3 - 2, 12 - 3 - 1]);
  checkConsistent(pool, ["a", "b"]);
  assertEquals(pool.truncate("a", 12), 0, "a full last block stays");
  assertEquals(pool.truncate("never", 3), 0);
  // Growing again takes what follows its last block, where that is free.
  const last = pool.table("a", 1).at(-1)!;
  assertEquals(pool.grow("a", 1, 13), [last + 1]);
  // A block another table shares, or the prefix cache keeps, stays held or cached.
  pool.share("c", 1, pool.table("a", 1).slice(3));
  pool.cache(1, last);
  assertEquals(pool.truncate("a", 4), 2 + 1 + 2, "layer 1's shared and cached blocks stay");
  assertEquals([pool.holders(1, last + 1), pool.holders(1, last), pool.idle], [1, 0, 1]);
  // Trailing VACANT entries go with them; a caller's mark past the end is an error, nothing freed.
  pool.dropLeading("a", 1);
  pool.growAll("d", 12);
  pool.vacate("d", 0, 2, 3, OFFLOADED);
  const used = pool.used;
  assertThrows(() => pool.truncate("d", 4), Error, "mark past block 1");
  assertEquals(pool.used, used);
  assertEquals(pool.truncate("a", 0), 0);
  assertEquals(pool.table("a", 2), []);
  pool.release("b");
  pool.release("c");
  pool.release("d");
  pool.uncache(1, last);
  assertEquals(pool.used, 0, "every block freed at the end");
});
