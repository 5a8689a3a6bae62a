// OrbitFlow's removable cache (§3.4, §4): a request the offload planner pauses keeps its device KV
// while it waits. Its blocks are taken only when room is actually claimed (a running request
// grows, or a waiting one is admitted), and then layer by layer, as few layers as make the room:
// first the blocks whose host copies have landed already (write-through, or earlier offloading),
// which cost no copy; then, as the paper does ("we incrementally move layers to CPU only when
// additional GPU space is needed", §4), layers copied out to the host on demand, one at a time,
// the copies running before the next step's kernels (as a swap-out's do, so the freed blocks are
// safe to reuse at once). A taken layer reads OFFLOADED; its last partial block stays. On resume
// only the layers taken come back from the host; the rest never moved. Only when the host has no
// room for the copies is a held request dropped whole (it will compute its KV again). With
// `copyOnDemand` false (the earlier behaviour, kept as the baseline) only landed blocks are taken
// and a held request whose landed copy cannot make the room is dropped whole.
//
// Pure bookkeeping over the pool and the host tier; the scheduler decides when (preemption.ts).

import type { BlockPool } from "./block_pool.ts";
import type { HostTier } from "./host_tier.ts";
import { OFFLOADED } from "./offload.ts";
import type { Request } from "../request/request.ts";

export interface RemovableStats {
  /** Requests paused holding their KV. */
  held: number;
  /** Layers, and device blocks, taken from held requests when room was claimed. */
  layersEvicted: number;
  blocksEvicted: number;
  /** Of those, blocks copied out to the host on demand (their host copy had not landed). */
  blocksCopiedOut: number;
  /** Held requests dropped whole (their host copy could not make the room). */
  dropped: number;
  /** Held requests resumed, and the blocks they brought back from the host. */
  resumed: number;
  blocksRestored: number;
}

export class RemovableCache {
  readonly stats: RemovableStats = {
    held: 0,
    layersEvicted: 0,
    blocksEvicted: 0,
    blocksCopiedOut: 0,
    dropped: 0,
    resumed: 0,
    blocksRestored: 0,
  };
  /** Held requests, in pause order (the longest-held gives up its layers first). */
  private held: Request[] = [];

  constructor(
    private readonly pool: BlockPool,
    private readonly tier: HostTier,
    private readonly copyOnDemand = true,
  ) {}

  /** `req` was just paused keeping its device KV (it has left the batch). */
  hold(req: Request): void {
    this.held.push(req);
    this.stats.held++;
  }

  /** True while `req` waits holding KV this cache may take (not dropped, not ended, not resumed). */
  holds(req: Request): boolean {
    if (!this.held.includes(req)) return false;
    const valid = req.state === "paused" && req.computed > 0 && req.dropped === 0 &&
      !req.swapped && this.pool.heldBy(req.id) > 0;
    if (!valid) this.held = this.held.filter((r) => r !== req);
    return valid;
  }

  /**
   * Takes layers of held requests (not `needy`) until every layer of `needy` can hold `tokens`
   * positions (a held `needy`: with its own taken layers back too). False when nothing was taken
   * (no room was needed, or none could be made).
   */
  evictFor(needy: Request, tokens: number): boolean {
    if (this.held.length === 0 || (this.held.length === 1 && this.held[0] === needy)) return false;
    const need = this.needOf(needy, tokens);
    if (need.every((n) => n <= 0)) return false;
    let taken = false;
    const others = this.held.filter((r) => r !== needy && this.holds(r));
    // The fewest layers first: blocks whose host copy has landed (no copy needed), then layers
    // copied out on demand, arena by arena.
    const passes = this.copyOnDemand ? [false, true] : [false];
    for (const copy of passes) {
      for (const req of others) {
        for (let layer = this.pool.numLayers - 1; layer >= 0; layer--) {
          const arena = this.pool.layerArena[layer];
          if (need[arena] <= 0) continue;
          const freed = this.evictLayer(req, layer, copy);
          need[arena] -= freed;
          taken ||= freed > 0;
        }
        if (need.every((n) => n <= 0)) return true;
      }
    }
    // The host could not take the layers: drop held requests whole, longest-held first.
    for (const req of others) {
      if (need.every((n) => n <= 0)) break;
      if (!this.holds(req)) continue;
      const before = this.pool.layerArena.map(() => 0);
      for (let l = 0; l < this.pool.numLayers; l++) {
        before[this.pool.layerArena[l]] += this.pool.table(req.id, l).filter((b) => b >= 0).length;
      }
      this.drop(req);
      before.forEach((n, a) => need[a] -= n);
      taken = true;
    }
    return taken;
  }

  /**
   * Readmits held `req` with every layer able to hold `tokens` positions: makes the room (taking
   * others' layers), grows its tables, and brings its taken layers back from the host (the copies
   * in run before the next step's kernels). False, with nothing changed, when the room is not
   * there even so.
   */
  resume(req: Request, tokens: number): boolean {
    while (this.needOf(req, tokens).some((n) => n > 0)) {
      if (!this.evictFor(req, tokens)) return false;
    }
    if (!this.pool.growAll(req.id, tokens)) return false;
    for (let layer = 0; layer < this.pool.numLayers; layer++) {
      const restored = this.pool.refill(req.id, layer, OFFLOADED)!;
      if (restored.length === 0) continue;
      this.tier.copyLayerIn(req, layer, restored);
      this.stats.blocksRestored += restored.length;
    }
    this.held = this.held.filter((r) => r !== req);
    this.stats.resumed++;
    return true;
  }

  /** Blocks each arena lacks for `req` to hold `tokens` positions everywhere (≤ 0: enough). */
  private needOf(req: Request, tokens: number): number[] {
    const need = this.pool.shortfall(req.id, tokens);
    if (this.held.includes(req)) {
      for (let l = 0; l < this.pool.numLayers; l++) {
        need[this.pool.layerArena[l]] += this.pool.marked(req.id, l, OFFLOADED);
      }
    }
    return need.map((n, a) => n - this.pool.availableIn(a));
  }

  /**
   * Frees `req`'s blocks of `layer` whose host copy has landed, or with `copy` its full blocks
   * after copying out what the host lacks; returns the blocks freed.
   */
  private evictLayer(req: Request, layer: number, copy: boolean): number {
    const table = this.pool.table(req.id, layer);
    const B = this.pool.blockSize;
    let upTo = Math.min(Math.floor(req.hostTokens / B), table.length);
    if (copy && !this.tier.filling(req)) {
      // Its full blocks (the last partial one stays): what the host lacks goes out first, before
      // the next step's kernels, so the blocks may be given away now. Short of host room, only
      // what is on the host or on its way leaves.
      const full = Math.min(Math.floor(req.computed / B), table.length);
      const moved = this.tier.copyLayerOut(req, layer, full);
      this.stats.blocksCopiedOut += moved;
      upTo = Math.max(upTo, Math.min(this.tier.blocksOut(req, layer), full));
    }
    // Earlier evictions (and offloading while it ran) took leading blocks: go on after them.
    let from = 0;
    while (from < table.length && table[from] < 0) from++;
    if (upTo <= from) return 0;
    const freed = this.pool.vacate(req.id, layer, from, upTo, OFFLOADED);
    this.stats.layersEvicted++;
    this.stats.blocksEvicted += upTo - from;
    return freed;
  }

  /** Drops a held request's KV on both tiers: it will compute it again when it resumes. */
  private drop(req: Request): void {
    this.tier.forgetLayers(req, false);
    this.tier.release(req);
    this.pool.release(req.id);
    req.forgetKv();
    this.held = this.held.filter((r) => r !== req);
    this.stats.dropped++;
  }
}
