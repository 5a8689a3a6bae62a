// KvTransfers (engine/kv/kv_transfers.ts) on the GPU, without a model: copies out land in host
// storage only once their readback has come back, and reading a host block before then is refused;
// copies in write the host bytes into other device blocks, K and V; contiguous blocks move as one
// run (two copies: K and V) unless coalescing is off; a prefetch is staged at once and lands
// between layers; copies out after a layer read what came before them; the counters add up.

import { DeviceKv, type KvLayout } from "../../engine/kv/device_kv.ts";
import { HostKv } from "../../engine/kv/host_kv.ts";
import { KvTransfers } from "../../engine/kv/kv_transfers.ts";
import type { KvCopy } from "../../engine/kv/kv_copies.ts";
import { readBack, writeBytes } from "../../engine/gpu/buffers.ts";
import type { Gpu } from "../../engine/gpu/device.ts";
import { assert, assertEquals, assertThrows } from "../helpers/testing.ts";
import { testGpu } from "../helpers/gpu.ts";

const LAYOUT: KvLayout = {
  numLayers: 2,
  numKvHeads: 1,
  headDim: 4,
  blockSize: 2,
  blocksPerArena: [8],
  layerArena: [0, 0],
  maxSlots: 1,
  maxBlocksPerSeq: 4,
};

/** A device pool whose block b holds bytes 2b+1 (K) and 2b+2 (V), a host tier, the transfers. */
async function setup(coalesce = true) {
  const gpu = await testGpu();
  const kv = new DeviceKv(gpu, LAYOUT);
  const per = DeviceKv.bytesPerBlock(gpu, LAYOUT);
  for (let b = 0; b < 8; b++) {
    writeBytes(gpu, kv.k[0], b * per, new Uint8Array(per).fill(2 * b + 1));
    writeBytes(gpu, kv.v[0], b * per, new Uint8Array(per).fill(2 * b + 2));
  }
  const host = new HostKv(per, 2 * 8 * per);
  return { gpu, kv, per, host, transfers: new KvTransfers(gpu, kv, host, coalesce) };
}

/** The first byte of each of `blocks` blocks of `buffer`. */
async function firstBytes(gpu: Gpu, buffer: GPUBuffer, per: number, blocks: number[]) {
  const bytes = new Uint8Array(await readBack(gpu, buffer));
  return blocks.map((b) => bytes[b * per]);
}

const copy = (
  direction: "out" | "in",
  deviceBlocks: number[],
  hostBlocks: number[],
  layer = 0,
): KvCopy => ({ direction, layer, deviceBlocks, hostBlocks });

Deno.test("KvTransfers: out lands after its readback; an in copy reads it into other blocks", async () => {
  const { gpu, kv, per, host, transfers } = await setup();
  try {
    const runs = transfers.plan([copy("out", [2, 3], [0, 1])]);
    assertEquals(runs, [{ direction: "out", arena: 0, deviceBlock: 2, hostBlock: 0, blocks: 2 }]);
    const landed = transfers.execute(runs);
    assertThrows(() => transfers.plan([copy("in", [5], [0])]), /still being filled/);
    await landed;
    assertEquals([host.k(0, 2)[0], host.k(0, 2)[per], host.v(0, 2)[0]], [5, 7, 6]);
    await transfers.execute(transfers.plan([copy("in", [5, 6], [0, 1])]));
    assertEquals(await firstBytes(gpu, kv.k[0], per, [5, 6]), [5, 7]);
    assertEquals(await firstBytes(gpu, kv.v[0], per, [5, 6]), [6, 8]);
    const stats = transfers.snapshot();
    assertEquals(stats.steps, 2);
    assertEquals(stats.out, { copies: 2, blocks: 2, bytes: 2 * 2 * per });
    assertEquals(stats.in, { copies: 2, blocks: 2, bytes: 2 * 2 * per });
    await transfers.idle();
  } finally {
    transfers.destroy();
  }
});

Deno.test("KvTransfers: without coalescing every block is a run of its own", async () => {
  const { transfers } = await setup(false);
  const runs = transfers.plan([copy("out", [2, 3], [0, 1]), copy("out", [4], [2], 1)]);
  assertEquals(runs.map((r) => [r.deviceBlock, r.blocks]), [[2, 1], [3, 1], [4, 1]]);
  await transfers.execute(runs);
  assertEquals(transfers.snapshot().out.copies, 6, "K and V of each");
  await transfers.idle();
  transfers.destroy();
});

Deno.test("KvTransfers: a prefetch is staged from host bytes at once and copied in between layers", async () => {
  const { gpu, kv, per, host, transfers } = await setup();
  host.k(3, 1).fill(42);
  host.v(3, 1).fill(43);
  const byLayer = transfers.planPrefetch([{ layer: 1, deviceBlocks: [7], hostBlocks: [3] }], []);
  const staged = transfers.stagePrefetch(byLayer)!;
  host.k(3, 1).fill(0); // rewritten once staged: the prefetch keeps what it read
  assertEquals([...staged.between.layers], [1]);
  const encoder = gpu.device.createCommandEncoder();
  staged.between.encode(encoder, 0);
  gpu.device.queue.submit([encoder.finish()]);
  assertEquals(await firstBytes(gpu, kv.k[0], per, [7]), [15], "nothing for layer 0");
  const next = gpu.device.createCommandEncoder();
  staged.between.encode(next, 1);
  gpu.device.queue.submit([next.finish()]);
  assertEquals(await firstBytes(gpu, kv.k[0], per, [7]), [42]);
  assertEquals(await firstBytes(gpu, kv.v[0], per, [7]), [43]);
  staged.release();
  assertEquals(transfers.snapshot().prefetch.blocks, 1);
  // A prefetch from a host block this step's own copies out fill is refused.
  const outs = transfers.plan([copy("out", [1], [4])]);
  assertThrows(
    () => transfers.planPrefetch([{ layer: 0, deviceBlocks: [7], hostBlocks: [4] }], outs),
    /still being filled/,
  );
  assert(transfers.stagePrefetch(new Map()) === null);
  transfers.destroy();
});

Deno.test("KvTransfers: copies out after a layer read what the commands before them wrote, and land once mapped", async () => {
  const { gpu, kv, per, host, transfers } = await setup();
  try {
    const byLayer = transfers.planAfterLayers([copy("out", [5, 6], [2, 3], 1)], [], []);
    assertEquals([...byLayer.keys()], [1]);
    const staged = transfers.stageAfterLayers(byLayer)!;
    assertEquals([...staged.after.layers], [1]);
    // The step's own layer writes block 5 (as kv_write would), then its copies out run.
    writeBytes(gpu, kv.k[0], 5 * per, new Uint8Array(per).fill(77));
    const encoder = gpu.device.createCommandEncoder();
    staged.after.encode(encoder, 1);
    gpu.device.queue.submit([encoder.finish()]);
    const landed = staged.land();
    // Reading them in before they land is refused, as for any copy out.
    assertThrows(() => transfers.plan([copy("in", [0], [2])]), /still being filled/);
    await landed;
    assertEquals([host.k(2, 1)[0], host.k(3, 1)[0], host.v(2, 1)[0]], [77, 13, 12]);
    assertEquals(transfers.snapshot().out, { copies: 2, blocks: 2, bytes: 2 * 2 * per });
    // Only copies out run after a layer, and none writes a host block another copy of the step
    // writes or a prefetch reads.
    assertThrows(
      () => transfers.planAfterLayers([copy("in", [5], [2])], [], []),
      /only "out" copies/,
    );
    const outs = transfers.plan([copy("out", [1], [4])]);
    assertThrows(
      () => transfers.planAfterLayers([copy("out", [5], [4])], outs, []),
      /written or read by another copy/,
    );
    assertThrows(
      () =>
        transfers.planAfterLayers([copy("out", [5], [6])], [], [
          { layer: 0, deviceBlocks: [7], hostBlocks: [6] },
        ]),
      /written or read by another copy/,
    );
    assert(transfers.stageAfterLayers(new Map()) === null);
    await transfers.idle();
  } finally {
    transfers.destroy();
  }
});
