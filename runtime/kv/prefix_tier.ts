// The prefix cache's host tier: moves cached prefix blocks between the device pool and the host
// tier for the prefix index (kv/prefix_index.ts keeps the books, picks what moves and when), as
// copies the host tier (kv/host_tier.ts) puts in the next step beside the swaps.
//
//   demotion:  the device evicts an idle entry and the host has room: its KV is copied out, and its
//              device blocks are free at once (a step runs its copies out before anything else);
//              a lookup may copy it back only once that step has been delivered (landed);
//   promotion: a lookup finds an entry only on the host: it gets fresh device blocks, copied into
//              before the next step's kernels, so the request that asked may prefill its uncached
//              tail in that very step (but, as copies out run first, nothing copies those blocks
//              out in that step: no swap-out, write-through or offload of it; HostTier.filling).
//
// A promoted entry keeps its host copy (full blocks never change): the next time the device evicts
// it, nothing is copied (FastSwitch's reuse, applied to the cache). The host evicts cached copies
// least recently used whenever a swap, an offloaded layer or a demotion needs the room.

import type { KvCopy } from "../../engine/engine.ts";
import type { HostCopy, PrefixEntry, PrefixIndex, PrefixMover } from "./prefix_index.ts";
import type { HostTier } from "./host_tier.ts";

export interface PrefixTierStats {
  /** Blocks copied to the host by demotions, and back to the device by host hits. */
  blocksOut: number;
  blocksIn: number;
}

export class PrefixTier implements PrefixMover {
  readonly stats: PrefixTierStats = { blocksOut: 0, blocksIn: 0 };

  constructor(index: PrefixIndex, private readonly tier: HostTier) {
    index.attachHost(tier.pool, this);
  }

  copyOut(entry: PrefixEntry, device: readonly number[], copy: HostCopy): void {
    const copies = device.map((b, layer) => perLayer("out", layer, b, copy.blocks[layer]));
    this.tier.cacheCopy(entry, copies, () => copy.landed = true);
    this.stats.blocksOut += copies.length;
  }

  copyIn(entry: PrefixEntry, device: readonly number[]): void {
    const host = entry.host!.blocks;
    this.tier.cacheCopy(entry, device.map((b, layer) => perLayer("in", layer, b, host[layer])));
    this.stats.blocksIn += device.length;
  }

  cancelIn(entry: PrefixEntry, layer: number, block: number): void {
    this.stats.blocksIn -= this.tier.dropCacheCopies(
      entry,
      (c) => c.direction === "in" && c.layer === layer && c.deviceBlocks.includes(block),
    );
  }

  cancelOut(entry: PrefixEntry): void {
    this.stats.blocksOut -= this.tier.dropCacheCopies(entry, (c) => c.direction === "out");
  }
}

function perLayer(direction: "in" | "out", layer: number, device: number, host: number): KvCopy {
  return { direction, layer, deviceBlocks: [device], hostBlocks: [host] };
}
