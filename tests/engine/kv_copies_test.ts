// kv_copies: copy lists become the fewest runs (contiguous on both sides, across layers of one
// arena, never across a host chunk), one run per block without coalescing, and the counts of
// copies and bytes; every malformed or unsafe list is refused with a message naming the copy.

import {
  checkCopies,
  type CopyGeometry,
  type CopyRun,
  type KvCopy,
  tally,
  toRuns,
} from "../../engine/kv/kv_copies.ts";
import { assertEquals, assertThrows } from "../helpers/testing.ts";
import { rng, testSeed } from "../helpers/random.ts";

const range = (start: number, n: number) => Array.from({ length: n }, (_, i) => start + i);
const out = (layer: number, deviceBlocks: number[], hostBlocks: number[]): KvCopy => ({
  direction: "out",
  layer,
  deviceBlocks,
  hostBlocks,
});
const inn = (layer: number, deviceBlocks: number[], hostBlocks: number[]): KvCopy => ({
  ...out(layer, deviceBlocks, hostBlocks),
  direction: "in",
});
const oneArena = [0, 0, 0];
const opts = { hostChunkBlocks: 1024 };

Deno.test("contiguous runs on both sides become one copy each", () => {
  const runs = toRuns([out(0, [4, 5, 6, 9, 10], [0, 1, 2, 3, 4])], oneArena, opts);
  assertEquals(runs, [
    { direction: "out", arena: 0, deviceBlock: 4, hostBlock: 0, blocks: 3 },
    { direction: "out", arena: 0, deviceBlock: 9, hostBlock: 3, blocks: 2 },
  ]);
});

Deno.test("a run breaks where only one side is contiguous", () => {
  const runs = toRuns([inn(1, [0, 1, 2, 3], [7, 8, 20, 21])], oneArena, opts);
  assertEquals(runs.map((r) => [r.deviceBlock, r.hostBlock, r.blocks]), [[0, 7, 2], [2, 20, 2]]);
});

Deno.test("runs span layers that share an arena, not layers in different arenas", () => {
  const copies = [out(0, range(0, 4), range(0, 4)), out(1, range(4, 4), range(4, 4))];
  assertEquals(toRuns(copies, [0, 0], opts).map((r) => r.blocks), [8]);
  const split = toRuns(copies, [0, 1], opts);
  assertEquals(split.map((r) => [r.arena, r.deviceBlock, r.blocks]), [[0, 0, 4], [1, 4, 4]]);
});

Deno.test("pairs listed out of order still merge; outs come before ins", () => {
  const runs = toRuns(
    [inn(0, [3, 2], [13, 12]), out(0, [1, 0], [11, 10])],
    oneArena,
    opts,
  );
  assertEquals(runs.map((r) => [r.direction, r.deviceBlock, r.hostBlock, r.blocks]), [
    ["out", 0, 10, 2],
    ["in", 2, 12, 2],
  ]);
});

Deno.test("a run never crosses a host chunk boundary", () => {
  const runs = toRuns([out(0, range(0, 10), range(5, 10))], oneArena, { hostChunkBlocks: 8 });
  assertEquals(runs.map((r) => [r.deviceBlock, r.hostBlock, r.blocks]), [[0, 5, 3], [3, 8, 7]]);
});

Deno.test("coalesce: false gives one run per block", () => {
  const runs = toRuns([out(0, range(0, 6), range(0, 6))], oneArena, { ...opts, coalesce: false });
  assertEquals(runs.length, 6);
  assertEquals(runs.every((r) => r.blocks === 1), true);
});

Deno.test("tally counts K and V copies, blocks and bytes per direction", () => {
  const runs: CopyRun[] = [
    { direction: "out", arena: 0, deviceBlock: 0, hostBlock: 0, blocks: 3 },
    { direction: "out", arena: 0, deviceBlock: 8, hostBlock: 3, blocks: 1 },
    { direction: "in", arena: 0, deviceBlock: 4, hostBlock: 9, blocks: 2 },
  ];
  assertEquals(tally(runs, 100), {
    out: { copies: 4, blocks: 4, bytes: 800 },
    in: { copies: 2, blocks: 2, bytes: 400 },
  });
});

Deno.test("a request laid out contiguously moves in one run per host chunk", () => {
  // 30 layers × 64 blocks, laid out layer after layer in one arena and on the host.
  const copies = range(0, 30).map((l) => out(l, range(64 * l, 64), range(64 * l, 64)));
  const layers = new Array(30).fill(0);
  const grouped = tally(toRuns(copies, layers, opts), 6144).out;
  const single = tally(toRuns(copies, layers, { ...opts, coalesce: false }), 6144).out;
  assertEquals([grouped.copies, single.copies], [4, 2 * 1920]); // 2 host chunks of 1024 blocks
  assertEquals(grouped.bytes, single.bytes);
});

Deno.test("random copy lists: runs cover exactly the listed pairs, maximal and in bounds", () => {
  const seed = testSeed();
  const next = rng(seed);
  for (let trial = 0; trial < 300; trial++) {
    const chunk = 1 + Math.floor(next() * 12);
    const layerArena = [0, 0, 1];
    const pairs = new Map<string, [number, number, number]>(); // "arena:device" → pair
    const copies: KvCopy[] = [];
    for (let c = 0; c < 1 + Math.floor(next() * 4); c++) {
      const layer = Math.floor(next() * 3);
      const d0 = Math.floor(next() * 40), h0 = Math.floor(next() * 40);
      const n = 1 + Math.floor(next() * 8);
      const dev: number[] = [], host: number[] = [];
      for (let i = 0; i < n; i++) {
        const d = d0 + i + (next() < 0.2 ? 50 : 0), h = h0 + i + (next() < 0.2 ? 50 : 0);
        const key = `${layerArena[layer]}:${d}`;
        if (pairs.has(key)) continue;
        pairs.set(key, [layerArena[layer], d, h]);
        dev.push(d);
        host.push(h);
      }
      copies.push(out(layer, dev, host));
    }
    const runs = toRuns(copies, layerArena, { hostChunkBlocks: chunk });
    const covered = runs.flatMap((r) =>
      range(0, r.blocks).map((i) => [r.arena, r.deviceBlock + i, r.hostBlock + i].join(":"))
    );
    const want = [...pairs.values()].map((p) => p.join(":"));
    assertEquals(covered.sort(), want.sort(), `seed ${seed} trial ${trial}`);
    for (const r of runs) {
      const first = Math.floor(r.hostBlock / chunk),
        last = Math.floor((r.hostBlock + r.blocks - 1) / chunk);
      assertEquals(first, last, `seed ${seed}: run crosses a host chunk`);
    }
    // Maximal: no run could take the next pair over.
    for (const r of runs) {
      const after = pairs.get(`${r.arena}:${r.deviceBlock + r.blocks}`);
      const canJoin = after && after[2] === r.hostBlock + r.blocks && after[2] % chunk !== 0;
      assertEquals(!!canJoin, false, `seed ${seed}: run ${JSON.stringify(r)} is not maximal`);
    }
  }
});

const geo: CopyGeometry = { layerArena: [0, 0, 1], blocksPerArena: [16, 8], hostBlocks: 32 };

Deno.test("checkCopies refuses malformed copies, naming them", () => {
  const bad: [KvCopy[], RegExp][] = [
    [[{ ...out(0, [0], [0]), direction: "up" as "in" }], /direction must be "out" or "in"/],
    [[out(3, [0], [0])], /layer 3 is out of range 0..2/],
    [[out(0, [0, 1], [0])], /2 device blocks but 1 host blocks/],
    [[out(2, [8], [0])], /device block 8 is out of range 0..7/],
    [[out(0, [1.5], [0])], /device block 1.5/],
    [[inn(0, [0], [32])], /host block 32 is out of range 0..31/],
    [[out(0, [0], [-1])], /host block -1/],
    [[inn(0, [3], [0]), inn(1, [3], [1])], /device block 3 of arena 0 is written twice/],
    [[out(0, [0], [5]), out(2, [0], [5])], /host block 5 is written twice/],
    [[inn(0, [0], [5]), out(1, [1], [5])], /host block 5 is filled by an "out" copy of the same/],
  ];
  for (const [copies, message] of bad) {
    assertThrows(() => checkCopies(copies, geo), message, JSON.stringify(copies));
  }
});

Deno.test("checkCopies allows what the queue orders safely", () => {
  // The same device block out and in within a step; the same block id in two arenas; reading a
  // host block twice.
  checkCopies([out(0, [3], [0]), inn(0, [3], [1])], geo);
  checkCopies([inn(0, [3], [0]), inn(2, [3], [1])], geo);
  checkCopies([inn(0, [1], [4]), inn(0, [2], [4])], geo);
  checkCopies([], { ...geo, hostBlocks: 0 });
});

Deno.test("checkCopies refuses reading a host block still being filled, and any copy without a tier", () => {
  const pending = (h: number) => h === 7;
  assertThrows(() => checkCopies([inn(0, [0], [7])], geo, pending), /still being filled/);
  checkCopies([out(0, [0], [7])], geo, pending);
  assertThrows(
    () => checkCopies([out(0, [0], [0])], { ...geo, hostBlocks: 0 }),
    /no host KV tier/,
  );
});
