// OrbitFlow's removable cache (§3.4, §4): a request the offload planner pauses keeps its device KV
// while it waits. Its blocks are taken only when room is actually claimed (a running request
// grows, or a waiting one is admitted), and then layer by layer, as few layers as make the room:
// a layer whose blocks' host copies have landed (write-through, or earlier offloading) leaves the
// device and reads OFFLOADED, its newest blocks (not on the host yet) staying. On resume only the
// layers taken come back from the host; the rest never moved. A held request whose host copy
// cannot make the room is dropped whole (it will compute its KV again), as preemption would.
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
    dropped: 0,
    resumed: 0,
    blocksRestored: 0,
  };
  /** Held requests, in pause order (the longest-held gives up its layers first). */
  private held: Request[] = [];

  constructor(private readonly pool: BlockPool, private readonly tier: HostTier) {}

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
    // The fewest layers first: only blocks whose host copy has landed, arena by arena.
    for (const req of others) {
      for (let layer = this.pool.numLayers - 1; layer >= 0; layer--) {
        const arena = this.pool.layerArena[layer];
        if (need[arena] <= 0) continue;
        const freed = this.evictLayer(req, layer);
        need[arena] -= freed;
        taken ||= freed > 0;
      }
      if (need.every((n) => n <= 0)) return true;
    }
    // Host copies could not make the room: drop held requests whole, longest-held first.
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

  /** Frees `req`'s blocks of `layer` whose host copy has landed; returns the blocks freed. */
  private evictLayer(req: Request, layer: number): number {
    const table = this.pool.table(req.id, layer);
    const landed = Math.min(Math.floor(req.hostTokens / this.pool.blockSize), table.length);
    // Earlier evictions (and offloading while it ran) took leading blocks: go on after them.
    let from = 0;
    while (from < table.length && table[from] < 0) from++;
    if (landed <= from) return 0;
    const freed = this.pool.vacate(req.id, layer, from, landed, OFFLOADED);
    this.stats.layersEvicted++;
    this.stats.blocksEvicted += landed - from;
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
