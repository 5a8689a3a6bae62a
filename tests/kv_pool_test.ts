// BlockPool: allocation, growth, release and contiguity of per-layer KV blocks (pure host logic),
// and DeviceKv's layout sizing and table uploads.

import { BlockPool } from "../engine/kv/block_pool.ts";
import { DeviceKv } from "../engine/kv/device_kv.ts";
import { readU32 } from "../engine/gpu/buffers.ts";
import type { Gpu } from "../engine/gpu/device.ts";
import { assert, assertEquals, assertThrows } from "./helpers/testing.ts";
import { testGpu } from "./helpers/gpu.ts";
import { rng, testSeed } from "./helpers/random.ts";

/** Every block is either free or held by exactly one (sequence, layer), and counts agree. */
function checkConsistent(pool: BlockPool, seqs: (number | string)[]): void {
  for (let layer = 0; layer < pool.numLayers; layer++) {
    const seen = new Set<number>();
    for (const s of seqs) {
      for (const b of pool.table(s, layer)) {
        assert(b >= 0 && b < pool.total, `block ${b} out of range`);
        assert(!seen.has(b), `block ${b} of layer ${layer} held twice`);
        seen.add(b);
      }
    }
    assertEquals(pool.used(layer), seen.size, `layer ${layer}: used count`);
    assertEquals(pool.free(layer) + pool.used(layer), pool.total, `layer ${layer}: free + used`);
  }
}

Deno.test("blocksFor rounds up to whole blocks", () => {
  const pool = new BlockPool(1, 8, 16);
  assertEquals([0, 1, 16, 17, 32, 33].map((t) => pool.blocksFor(t)), [0, 1, 1, 2, 2, 3]);
});

Deno.test("fresh allocations take the lowest-addressed run that fits", () => {
  const pool = new BlockPool(1, 16, 4);
  assertEquals(pool.grow("a", 0, 12), [0, 1, 2]);
  assertEquals(pool.grow("b", 0, 8), [3, 4]);
  assertEquals(pool.grow("c", 0, 16), [5, 6, 7, 8]);
  pool.release("b"); // hole of 2 at 3..4
  assertEquals(pool.grow("d", 0, 12), [9, 10, 11], "3 blocks skip the 2-block hole");
  assertEquals(pool.grow("e", 0, 8), [3, 4], "2 blocks fill the hole");
  assertEquals(pool.runsOf("d", 0), 1);
  checkConsistent(pool, ["a", "c", "d", "e"]);
});

Deno.test("a growing sequence extends its last block in place while the next blocks are free", () => {
  const pool = new BlockPool(1, 16, 4);
  assertEquals(pool.grow("a", 0, 4), [0]);
  assertEquals(pool.grow("a", 0, 5), [1]);
  assertEquals(pool.grow("a", 0, 8), [], "still within two blocks");
  assertEquals(pool.grow("a", 0, 16), [2, 3]);
  assertEquals(pool.runsOf("a", 0), 1);
  // Another sequence right behind it: a's next growth must jump, and then continue contiguously.
  assertEquals(pool.grow("b", 0, 4), [4]);
  assertEquals(pool.grow("a", 0, 24), [5, 6]);
  assertEquals(pool.table("a", 0), [0, 1, 2, 3, 5, 6]);
  assertEquals(pool.runsOf("a", 0), 2);
  assertEquals(pool.grow("a", 0, 28), [7], "continues after its new last block");
  assertEquals(pool.runsOf("a", 0), 2);
});

Deno.test("when no run is large enough, the largest runs are used first", () => {
  const pool = new BlockPool(1, 12, 1);
  // Free pattern after releases: holes of 1 (0), 3 (2..4), 2 (6..7).
  for (let i = 0; i < 12; i++) pool.grow(i, 0, 1);
  for (const i of [0, 2, 3, 4, 6, 7]) pool.release(i);
  assertEquals(pool.grow("x", 0, 5), [2, 3, 4, 6, 7]);
  assertEquals(pool.runsOf("x", 0), 2);
  assertEquals(pool.free(0), 1);
});

Deno.test("exhaustion returns null and changes nothing", () => {
  const pool = new BlockPool(2, 6, 4);
  assertEquals(pool.grow("a", 0, 12), [0, 1, 2]);
  assertEquals(pool.grow("b", 0, 8), [3, 4]);
  const before = { a: pool.table("a", 0), b: pool.table("b", 0), used: pool.used(0) };
  assertEquals(pool.grow("b", 0, 20), null, "needs 3 more, 1 free");
  assertEquals(pool.grow("c", 0, 8), null, "a new sequence that does not fit");
  assertEquals(pool.table("b", 0), before.b);
  assertEquals(pool.table("a", 0), before.a);
  assertEquals(pool.used(0), before.used);
  assertEquals(pool.table("c", 0), []);
  assertEquals(pool.sequences().sort(), ["a", "b"]);
  assert(pool.canAllocate([1, 6]), "1 free on layer 0, 6 on layer 1");
  assert(!pool.canAllocate(2), "layer 0 has only 1 free");
  assertEquals(pool.grow("b", 0, 12), [5], "the last block still fits");
  checkConsistent(pool, ["a", "b"]);
});

Deno.test("layers allocate independently", () => {
  const pool = new BlockPool(3, 8, 2);
  assertEquals(pool.grow("a", 2, 6), [0, 1, 2]);
  assertEquals(pool.grow("b", 0, 2), [0]);
  assertEquals(pool.grow("b", 2, 2), [3]);
  assertEquals([0, 1, 2].map((l) => pool.used(l)), [1, 0, 4]);
  assertEquals(pool.table("a", 0), []);
  assertEquals(pool.releaseLayer("a", 2), 3);
  assertEquals([0, 1, 2].map((l) => pool.used(l)), [1, 0, 1]);
  assertEquals(pool.sequences(), ["b"], "a sequence with no blocks left is forgotten");
  checkConsistent(pool, ["a", "b"]);
});

Deno.test("random grow/release sequences return the pool to empty", () => {
  const seed = testSeed();
  const next = rng(seed);
  const pool = new BlockPool(4, 64, 16);
  const tokens = new Map<number, number>();
  try {
    for (let step = 0; step < 2000; step++) {
      const id = Math.floor(next() * 12);
      if (next() < 0.25) {
        const held = [0, 1, 2, 3].reduce((s, l) => s + pool.table(id, l).length, 0);
        assertEquals(pool.release(id), held);
        tokens.delete(id);
      } else {
        const layer = Math.floor(next() * 4);
        const want = (tokens.get(id * 4 + layer) ?? 0) + Math.floor(next() * 40);
        const had = pool.table(id, layer);
        const freeBefore = pool.free(layer);
        const added = pool.grow(id, layer, want);
        if (added === null) {
          assertEquals(pool.table(id, layer), had, "failed grow changed the table");
          assertEquals(pool.free(layer), freeBefore, "failed grow changed the free count");
          assert(
            pool.blocksFor(want) - had.length > freeBefore,
            "grow refused although blocks were free",
          );
        } else {
          assertEquals(pool.table(id, layer), [...had, ...added]);
          assertEquals(pool.table(id, layer).length, Math.max(had.length, pool.blocksFor(want)));
          tokens.set(id * 4 + layer, want);
        }
      }
      checkConsistent(pool, Array.from({ length: 12 }, (_, i) => i));
    }
    for (let id = 0; id < 12; id++) pool.release(id);
    for (let layer = 0; layer < 4; layer++) assertEquals(pool.free(layer), 64);
    assertEquals(pool.sequences(), []);
    // Empty again means contiguous again: one sequence can take every block as a single run.
    assertEquals(pool.grow("all", 1, 64 * 16)?.length, 64);
    assertEquals(pool.runsOf("all", 1), 1);
  } catch (e) {
    throw new Error(`seed ${seed}: ${(e as Error).message}`, { cause: e });
  }
});

Deno.test("errors are clear", () => {
  assertThrows(() => new BlockPool(0, 8), /numLayers/);
  assertThrows(() => new BlockPool(2, 0), /numBlocksPerLayer/);
  const pool = new BlockPool(2, 8);
  assertThrows(() => pool.grow("a", 2, 1), /layer 2 is out of range 0\.\.1/);
  assertThrows(() => pool.grow("a", 0, -1), /tokens/);
  assertThrows(() => pool.used(-1), /layer -1/);
  assertEquals(pool.release("never"), 0);
});

Deno.test("DeviceKv.layoutForBudget fits the budget and the device's buffer limits", async () => {
  const gpu: Gpu = await testGpu();
  const dims = { numLayers: 4, numKvHeads: 2, headDim: 64 };
  const w = gpu.f16 ? 2 : 4;
  const perBlock = 16 * 2 * 64 * w; // one layer's K block
  const budget = 3 << 20;
  const layout = DeviceKv.layoutForBudget(gpu, dims, budget, 8, 1000);
  assertEquals(layout.maxBlocksPerSeq, Math.ceil(1000 / 16));
  const tableBytes = 4 * 8 * layout.maxBlocksPerSeq * 4;
  assert(2 * 4 * layout.numBlocks * perBlock + tableBytes <= budget, "over budget");
  assert(
    2 * 4 * (layout.numBlocks + 1) * perBlock + tableBytes > budget,
    "a block more would still fit",
  );
  const kv = new DeviceKv(gpu, layout);
  assertEquals(kv.bytes, 2 * 4 * layout.numBlocks * perBlock + tableBytes);
  kv.destroy();

  // A budget larger than any one buffer may be: numBlocks capped by the binding limit.
  const small = { ...gpu, maxBinding: 64 * perBlock };
  assertEquals(DeviceKv.layoutForBudget(small, dims, 1 << 30, 64, 4096).numBlocks, 64);
  // Never more blocks than maxSlots sequences of maxSeqLen could use.
  assertEquals(DeviceKv.layoutForBudget(gpu, dims, 1 << 30, 2, 100).numBlocks, 2 * 7);
  assertThrows(() => DeviceKv.layoutForBudget(gpu, dims, 1000, 8, 1000), /holds no block/);
});

Deno.test("DeviceKv.writeTable and clearSlot upload the right rows", async () => {
  const gpu = await testGpu();
  const layout = {
    numLayers: 3,
    numKvHeads: 1,
    headDim: 8,
    blockSize: 16,
    numBlocks: 32,
    maxSlots: 4,
    maxBlocksPerSeq: 5,
  };
  const kv = new DeviceKv(gpu, layout);
  kv.writeTable(2, 1, [7, 3, 9]);
  kv.writeTable(2, 1, [30], 3);
  kv.writeTable(0, 2, [1, 2, 3, 4, 5]);
  kv.writeTable(2, 0, [11]);
  const entries = 3 * 4 * 5;
  let table = await readU32(gpu, kv.blockTable, entries);
  const at = (l: number, s: number) =>
    Array.from(table.subarray((l * 4 + s) * 5, (l * 4 + s + 1) * 5));
  assertEquals(at(1, 2), [7, 3, 9, 30, 0]);
  assertEquals(at(2, 0), [1, 2, 3, 4, 5]);
  assertEquals(at(0, 2), [11, 0, 0, 0, 0]);
  kv.clearSlot(2);
  table = await readU32(gpu, kv.blockTable, entries);
  assertEquals(at(1, 2), [0, 0, 0, 0, 0]);
  assertEquals(at(0, 2), [0, 0, 0, 0, 0]);
  assertEquals(at(2, 0), [1, 2, 3, 4, 5], "other slots untouched");
  assertThrows(() => kv.writeTable(4, 0, [1]), /slot 4/);
  assertThrows(() => kv.writeTable(0, 0, [32]), /block id 32/);
  assertThrows(() => kv.writeTable(0, 0, [1, 2], 4), /exceed maxBlocksPerSeq/);
  kv.destroy();
});
