// DeviceKv: layout sizing against a fake device's limits (no GPU), buffers per arena, and table
// uploads.

import { NOT_RESIDENT } from "../../engine/kv/pool_shape.ts";
import { DeviceKv, type KvLayout } from "../../engine/kv/device_kv.ts";
import { BlockPool } from "../../runtime/kv/block_pool.ts";
import { readU32 } from "../../engine/gpu/buffers.ts";
import type { Gpu } from "../../engine/gpu/device.ts";
import { assert, assertEquals, assertThrows } from "../helpers/testing.ts";
import { testGpu } from "../helpers/gpu.ts";

// ---- DeviceKv: sizing (no GPU) ----

/** A stand-in for the device: layoutForBudget reads only the limits and the dtype. */
function fakeGpu(limits: { maxBinding: number; maxBufferSize?: number; f16?: boolean }): Gpu {
  return {
    device: undefined as unknown as GPUDevice,
    adapterName: "fake",
    f16: limits.f16 ?? false,
    maxBinding: limits.maxBinding,
    maxBufferSize: limits.maxBufferSize ?? limits.maxBinding,
  };
}

const DIMS = { numLayers: 4, numKvHeads: 2, headDim: 64 };

/** Bytes of one block of K for DIMS at `blockSize` on the f32 path. */
const kBlock = (blockSize = 16, dims = DIMS) => blockSize * dims.numKvHeads * dims.headDim * 4;

/** The budget that holds exactly `blocks` blocks (K and V) plus the block table. */
function budgetFor(
  blocks: number,
  maxSlots: number,
  maxSeqLen: number,
  blockSize = 16,
  dims = DIMS,
) {
  const table = dims.numLayers * maxSlots * Math.ceil(maxSeqLen / blockSize) * 4;
  return table + 2 * blocks * kBlock(blockSize, dims);
}

function layersIn(layout: KvLayout, arena: number): number {
  return layout.layerArena.filter((a) => a === arena).length;
}

/** What every layout must satisfy: budget, limits, arenas serving contiguous layer ranges. */
function checkLayout(gpu: Gpu, layout: KvLayout, budget: number): void {
  const perBlock = DeviceKv.bytesPerBlock(gpu, layout);
  const limit = Math.min(gpu.maxBinding, gpu.maxBufferSize);
  const blocks = layout.blocksPerArena.reduce((a, b) => a + b, 0);
  const table = layout.numLayers * layout.maxSlots * layout.maxBlocksPerSeq * 4;
  assert(2 * blocks * perBlock + table <= budget, `${blocks} blocks are over the budget`);
  for (const n of layout.blocksPerArena) assert(n >= 1 && n * perBlock <= limit, `arena of ${n}`);
  assertEquals(layout.layerArena.length, layout.numLayers);
  assert(layout.blocksPerArena.length <= layout.numLayers, "more arenas than layers");
  for (let l = 1; l < layout.numLayers; l++) {
    const step = layout.layerArena[l] - layout.layerArena[l - 1];
    assert(step === 0 || step === 1, `layerArena ${layout.layerArena} is not in layer order`);
  }
  layout.blocksPerArena.forEach((_, a) => assert(layersIn(layout, a) >= 1, `arena ${a} unused`));
}

Deno.test("layoutForBudget: one arena while the pool fits one binding", () => {
  const gpu = fakeGpu({ maxBinding: 1 << 30 });
  const budget = 3 << 20;
  const layout = DeviceKv.layoutForBudget(gpu, DIMS, budget, 8, 1000);
  checkLayout(gpu, layout, budget);
  assertEquals(layout.layerArena, [0, 0, 0, 0]);
  assertEquals(layout.blockSize, 16);
  assertEquals(layout.maxSlots, 8);
  assertEquals(layout.maxBlocksPerSeq, Math.ceil(1000 / 16));
  const [blocks] = layout.blocksPerArena;
  const table = 4 * 8 * layout.maxBlocksPerSeq * 4;
  assert(2 * (blocks + 1) * kBlock() + table > budget, "a block more would still fit");
  // Exactly at the budget: every block is used.
  assertEquals(
    DeviceKv.layoutForBudget(gpu, DIMS, budgetFor(77, 8, 1000), 8, 1000).blocksPerArena,
    [
      77,
    ],
  );
  assertEquals(
    DeviceKv.layoutForBudget(gpu, DIMS, budgetFor(77, 8, 1000) - 1, 8, 1000).blocksPerArena,
    [76],
  );
  // Never more blocks than maxSlots requests of maxSeqLen tokens could use on every layer.
  assertEquals(DeviceKv.layoutForBudget(gpu, DIMS, 1 << 30, 2, 100).blocksPerArena, [4 * 2 * 7]);
  // The f16 path halves a block, so the same budget holds (about) twice the blocks.
  const f16 = DeviceKv.layoutForBudget(
    fakeGpu({ maxBinding: 1 << 30, f16: true }),
    DIMS,
    budget,
    8,
    1000,
  );
  assertEquals(f16.blocksPerArena, [Math.floor((budget - table) / kBlock())]);
});

Deno.test("layoutForBudget: splits into arenas only past min(maxBinding, maxBufferSize)", () => {
  const P = kBlock();
  const [slots, seq] = [64, 4096];
  for (
    const limits of [
      { maxBinding: 64 * P },
      { maxBinding: 64 * P, maxBufferSize: 1 << 30 },
      { maxBinding: 1 << 30, maxBufferSize: 64 * P },
      { maxBinding: 64 * P + P - 1, maxBufferSize: 1 << 30 },
    ]
  ) {
    const gpu = fakeGpu(limits);
    const at = (blocks: number) =>
      DeviceKv.layoutForBudget(gpu, DIMS, budgetFor(blocks, slots, seq), slots, seq);
    const what = JSON.stringify(limits);
    // 64 blocks fit one arena exactly; one more needs a second.
    assertEquals(at(64).blocksPerArena, [64], what);
    assertEquals(at(64).layerArena, [0, 0, 0, 0], what);
    assertEquals(at(65).blocksPerArena.length, 2, what);
    assertEquals(at(65).layerArena, [0, 0, 1, 1], what);
    assertEquals(at(128).blocksPerArena, [64, 64], what);
    for (const blocks of [4, 63, 64, 65, 100, 128]) {
      checkLayout(gpu, at(blocks), budgetFor(blocks, slots, seq));
    }
  }
});

Deno.test("layoutForBudget: never more arenas than layers, each at most one binding", () => {
  const P = kBlock();
  const gpu = fakeGpu({ maxBinding: 10 * P });
  for (const numLayers of [1, 2, 3, 5]) {
    const dims = { ...DIMS, numLayers };
    const layout = DeviceKv.layoutForBudget(gpu, dims, 1 << 30, 64, 4096);
    checkLayout(gpu, layout, 1 << 30);
    assertEquals(layout.blocksPerArena, new Array(numLayers).fill(10), `${numLayers} layers`);
    assertEquals(layout.layerArena, Array.from({ length: numLayers }, (_, l) => l));
  }
  // A block larger than a binding can never be placed.
  assertThrows(
    () => DeviceKv.layoutForBudget(fakeGpu({ maxBinding: P - 4 }), DIMS, 1 << 30, 4, 64),
    RangeError,
  );
});

Deno.test("layoutForBudget: blocks proportional to the layers each arena serves", () => {
  const P = kBlock();
  const gpu = fakeGpu({ maxBinding: 100 * P });
  // Equal blocks per layer everywhere, whether the layers divide evenly among the arenas or not
  // (here the largest arena's share stays within the limit; see the ignored test below).
  const cases = [[4, 150, 2], [6, 250, 3], [8, 390, 4], [6, 120, 2], [3, 120, 2], [5, 140, 2]];
  for (const [numLayers, blocks, arenas] of cases) {
    const dims = { ...DIMS, numLayers };
    const budget = budgetFor(blocks, 8, 4096, 16, dims);
    const layout = DeviceKv.layoutForBudget(gpu, dims, budget, 8, 4096);
    checkLayout(gpu, layout, budget);
    const what = `${numLayers} layers, ${blocks} blocks: ${layout.blocksPerArena}`;
    assertEquals(layout.blocksPerArena.length, arenas, what);
    const perLayer = blocks / numLayers;
    layout.blocksPerArena.forEach((n, a) => {
      assert(Math.abs(n / layersIn(layout, a) - perLayer) < 1, `${what}: arena ${a} has ${n}`);
    });
  }
});

Deno.test({
  // With 3 layers over 2 arenas, the 2-layer arena must not be capped at the binding limit while
  // the other gets more per layer (it once got 50 blocks per layer against 66).
  name: "layoutForBudget: proportional blocks when layers do not divide evenly among arenas",
  fn: () => {
    const P = kBlock();
    const gpu = fakeGpu({ maxBinding: 100 * P });
    for (const [numLayers, blocks] of [[3, 200], [5, 300], [6, 350], [7, 450]]) {
      const dims = { ...DIMS, numLayers };
      const budget = budgetFor(blocks, 8, 4096, 16, dims);
      const layout = DeviceKv.layoutForBudget(gpu, dims, budget, 8, 4096);
      checkLayout(gpu, layout, budget);
      const shares = layout.blocksPerArena.map((n, a) => n / layersIn(layout, a));
      const what =
        `${numLayers} layers, ${blocks} blocks: ${layout.blocksPerArena} over ${layout.layerArena}`;
      assert(Math.max(...shares) - Math.min(...shares) < 1, `${what}: not proportional`);
      const total = layout.blocksPerArena.reduce((a, b) => a + b, 0);
      assert(total > blocks - layout.blocksPerArena.length - numLayers, `${what}: budget unused`);
    }
  },
});

Deno.test("layoutForBudget: the block size is honoured", () => {
  const gpu = fakeGpu({ maxBinding: 1 << 30 });
  for (const blockSize of [4, 8, 16, 32, 64]) {
    const budget = budgetFor(50, 4, 1000, blockSize);
    const layout = DeviceKv.layoutForBudget(gpu, DIMS, budget, 4, 1000, blockSize);
    checkLayout(gpu, layout, budget);
    assertEquals(layout.blockSize, blockSize);
    assertEquals(layout.maxBlocksPerSeq, Math.ceil(1000 / blockSize));
    assertEquals(layout.blocksPerArena, [50], `block size ${blockSize}`);
    assertEquals(DeviceKv.bytesPerBlock(gpu, layout), kBlock(blockSize));
    // The layout is a pool shape.
    const pool = new BlockPool(layout);
    assertEquals(pool.blocksFor(1000), layout.maxBlocksPerSeq);
    assertEquals(pool.total, 50);
  }
});

Deno.test("layoutForBudget: a budget without one block per layer is refused", () => {
  const gpu = fakeGpu({ maxBinding: 1 << 30 });
  assertThrows(
    () => DeviceKv.layoutForBudget(gpu, DIMS, 1000, 8, 1000),
    /less than one block per layer/,
  );
  for (const blocks of [1, 3]) {
    assertThrows(
      () => DeviceKv.layoutForBudget(gpu, DIMS, budgetFor(blocks, 8, 1000), 8, 1000),
      /less than one block per layer/,
    );
  }
  assertThrows(
    () => DeviceKv.layoutForBudget(gpu, DIMS, budgetFor(4, 8, 1000) - 1, 8, 1000),
    /less than one block per layer/,
  );
  // One block per layer is enough for a layout (one arena of numLayers blocks).
  assertEquals(DeviceKv.layoutForBudget(gpu, DIMS, budgetFor(4, 8, 1000), 8, 1000).blocksPerArena, [
    4,
  ]);
});

Deno.test("DeviceKv refuses an arena above the device's limit before allocating it", () => {
  const P = kBlock();
  const gpu = fakeGpu({ maxBinding: 10 * P });
  const layout: KvLayout = {
    ...DIMS,
    blockSize: 16,
    maxSlots: 2,
    maxBlocksPerSeq: 4,
    blocksPerArena: [11],
    layerArena: [0, 0, 0, 0],
  };
  assertThrows(() => new DeviceKv(gpu, layout), /KV arena 0 would be/);
  assertThrows(() => new DeviceKv(gpu, { ...layout, layerArena: [0, 0, 0] }), /maps 3 layers/);
});

// ---- DeviceKv on the GPU ----

Deno.test("DeviceKv: one K and one V buffer per arena, shared by the arena's layers", async () => {
  const gpu = await testGpu();
  const layout: KvLayout = {
    numLayers: 3,
    numKvHeads: 1,
    headDim: 8,
    blockSize: 16,
    maxSlots: 4,
    maxBlocksPerSeq: 5,
    blocksPerArena: [8, 4],
    layerArena: [0, 0, 1],
  };
  const kv = new DeviceKv(gpu, layout);
  try {
    const perBlock = DeviceKv.bytesPerBlock(gpu, layout);
    assertEquals(perBlock, 16 * 8 * (gpu.f16 ? 2 : 4));
    assertEquals(kv.k.length, 2);
    assertEquals(kv.v.length, 2);
    assertEquals([kv.k[0].size, kv.k[1].size], [8 * perBlock, 4 * perBlock]);
    assertEquals([kv.v[0].size, kv.v[1].size], [8 * perBlock, 4 * perBlock]);
    assert(kv.kOf(0) === kv.k[0] && kv.kOf(1) === kv.k[0] && kv.kOf(2) === kv.k[1]);
    assert(kv.vOf(0) === kv.v[0] && kv.vOf(1) === kv.v[0] && kv.vOf(2) === kv.v[1]);
    assert(kv.kOf(0) !== kv.vOf(0));
    assertEquals(kv.bytes, 2 * 12 * perBlock + 3 * 4 * 5 * 4);
  } finally {
    kv.destroy();
  }
});

Deno.test("DeviceKv.writeTable uploads the right rows within each layer's arena", async () => {
  const gpu = await testGpu();
  const layout: KvLayout = {
    numLayers: 3,
    numKvHeads: 1,
    headDim: 8,
    blockSize: 16,
    maxSlots: 4,
    maxBlocksPerSeq: 5,
    blocksPerArena: [32, 4],
    layerArena: [0, 0, 1],
  };
  const kv = new DeviceKv(gpu, layout);
  try {
    const N = NOT_RESIDENT;
    kv.writeTable(2, 1, [7, 3, 9]);
    kv.writeTable(2, 1, [31], 3);
    kv.writeTable(0, 0, [1, 2, 3, 4, 5]);
    kv.writeTable(2, 2, [3, N, 0]);
    kv.writeTable(1, 2, [], 5);
    const entries = 3 * 4 * 5;
    let table = await readU32(gpu, kv.blockTable, entries);
    const at = (l: number, s: number) =>
      Array.from(table.subarray((l * 4 + s) * 5, (l * 4 + s + 1) * 5));
    assertEquals(at(1, 2), [7, 3, 9, 31, 0]);
    assertEquals(at(0, 0), [1, 2, 3, 4, 5]);
    assertEquals(at(2, 2), [3, N, 0, 0, 0]);
    assertEquals(at(0, 2), [0, 0, 0, 0, 0], "other layers of the slot untouched");
    // Clearing a slot is writing NOT_RESIDENT over it.
    for (let l = 0; l < 3; l++) kv.writeTable(2, l, new Array(5).fill(N));
    kv.writeTable(0, 0, [N, N], 1);
    table = await readU32(gpu, kv.blockTable, entries);
    for (let l = 0; l < 3; l++) assertEquals(at(l, 2), [N, N, N, N, N]);
    assertEquals(at(0, 0), [1, N, N, 4, 5], "other slots and entries untouched");

    // A block id must exist in the layer's own arena.
    kv.writeTable(3, 1, [31]);
    assertThrows(() => kv.writeTable(3, 1, [32]), /block id 32 is out of range 0\.\.31/);
    kv.writeTable(3, 2, [3]);
    assertThrows(() => kv.writeTable(3, 2, [4]), /block id 4 is out of range 0\.\.3/);
    assertThrows(() => kv.writeTable(3, 2, [0, 1, 31]), /block id 31/);
    assertThrows(() => kv.writeTable(3, 0, [-1]), /block id -1/);
    assertThrows(() => kv.writeTable(3, 0, [1.5]), /block id 1\.5/);
    assertThrows(() => kv.writeTable(4, 0, [1]), /slot 4/);
    assertThrows(() => kv.writeTable(0, 3, [1]), /layer 3/);
    assertThrows(() => kv.writeTable(0, 0, [1, 2], 4), /exceed maxBlocksPerSeq/);
    assertThrows(() => kv.writeTable(0, 0, [1], -1), /exceed maxBlocksPerSeq/);
    table = await readU32(gpu, kv.blockTable, entries);
    assertEquals(at(1, 3), [31, 0, 0, 0, 0]);
    assertEquals(at(2, 3), [3, 0, 0, 0, 0], "a refused write uploads nothing");
  } finally {
    kv.destroy();
  }
});
