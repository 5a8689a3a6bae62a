// PrefixTier (runtime/kv/prefix_tier.ts): the prefix index's demotions and promotions become copies
// in the host tier's next step. A demoted entry may come back only once its copy out has landed; a
// promotion's copy in holds the host blocks it reads until its step is taken; a copy the index
// cancels (its blocks freed before the step) is uncounted.

import { BlockPool } from "../../../runtime/kv/block_pool.ts";
import { HostTier } from "../../../runtime/kv/host_tier.ts";
import { PrefixIndex } from "../../../runtime/kv/prefix_index.ts";
import { PrefixTier } from "../../../runtime/kv/prefix_tier.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

/** A 2-layer device pool of 4 blocks of 4 positions with a prefix cache over a 4-block host tier. */
function setup() {
  const device = new BlockPool({ blocksPerArena: [4], layerArena: [0, 0], blockSize: 4 });
  const index = new PrefixIndex(device);
  const tier = new HostTier(device, 4);
  return { device, index, tier, prefixTier: new PrefixTier(index, tier) };
}

const TOKENS = [1, 2, 3, 4];

/** Caches TOKENS in a block of "a"'s, then lets the entry go idle. */
function cachedEntry(device: BlockPool, index: PrefixIndex) {
  device.growAll("a", 4);
  const entry = index.insert(null, TOKENS, [device.table("a", 0)[0], device.table("a", 1)[0]]);
  device.release("a");
  return entry;
}

Deno.test("prefix tier: a demotion is a copy out in the next step; the entry comes back only once it has landed", () => {
  const { device, index, tier, prefixTier } = setup();
  const entry = cachedEntry(device, index);
  const blocks = entry.blocks!;
  assert(device.growAll("b", 8), "the device evicts the idle entry");
  let step = tier.take();
  assertEquals(
    step.copies,
    [0, 1].map((layer) => ({
      direction: "out",
      layer,
      deviceBlocks: [blocks[layer]],
      hostBlocks: [entry.host!.blocks[layer]],
    })),
  );
  assertEquals(index.acquire("c", [...TOKENS, 9], 1), [], "not landed yet");
  tier.land(step.landings);
  assert(entry.host!.landed);
  device.release("b");
  // Promoted: copied into fresh blocks before the next step's kernels, its host blocks held.
  assertEquals(index.acquire("c", [...TOKENS, 9], 1), [entry]);
  const held = () => entry.host!.blocks.map((b, layer) => tier.pool.holders(layer, b));
  assertEquals(held(), [1, 1], "the reads hold its host blocks");
  step = tier.take();
  assertEquals(step.copies.map((c) => [c.direction, c.deviceBlocks]), [
    ["in", [entry.blocks![0]]],
    ["in", [entry.blocks![1]]],
  ]);
  assertEquals(held(), [0, 0], "the hold ends once the step is taken");
  assertEquals(prefixTier.stats, { blocksOut: 2, blocksIn: 2 });
});

Deno.test("prefix tier: copies the index cancels before their step are uncounted", () => {
  const { device, index, tier, prefixTier } = setup();
  const entry = cachedEntry(device, index);
  assert(device.growAll("b", 8));
  // The host needs all its blocks for a swap before the demotion's step: its copy out goes.
  assert(tier.pool.growAll("swap", 8));
  assertEquals([entry.evicted, prefixTier.stats.blocksOut], [true, 0]);
  assertEquals(tier.take().copies, []);
});
