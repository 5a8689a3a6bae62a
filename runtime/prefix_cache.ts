// How the scheduler uses the prefix cache (`--prefix-cache`; the books are kv/prefix_index.ts): a
// request being admitted shares the cached blocks that cover its leading tokens, and every block a
// running request fills is offered to the cache once its tokens are known and its KV is written.
//
// A request caches its blocks in order, each entry chained after the one before, for as long as
// they are its own: once another request has cached the same tokens first (in other blocks), or its
// blocks left the device (an offloaded layer, its oldest blocks dropped, freed behind a sliding
// window), it caches no more until it is admitted again.

import type { BlockPool } from "./kv/block_pool.ts";
import type { PrefixEntry, PrefixIndex, PrefixStats } from "./kv/prefix_index.ts";
import type { Request } from "./request/request.ts";

/** What the cache holds for a request in its current residency. */
interface Cached {
  /** Entries of its first full blocks, in order (matched or registered). */
  entries: PrefixEntry[];
  /** Its blocks are no longer its own to offer: it caches no more (this residency). */
  stopped: boolean;
}

export class PrefixCache {
  private readonly held = new WeakMap<Request, Cached>();

  constructor(private readonly index: PrefixIndex, private readonly pool: BlockPool) {}

  /**
   * Shares the cached blocks that cover `req`'s leading tokens (all but the last: its logits must
   * be computed) into its tables; returns their entries. Those found only in the host tier come
   * back into fresh blocks, copied in before the next step's kernels run (so `req` may prefill
   * its tail in that step).
   */
  share(req: Request): PrefixEntry[] {
    // Mean and cls pooling read rows a shared prefix would skip.
    if (req.pooled && req.pooled.mode !== "last") return [];
    const target = req.prefillTarget;
    const most = Math.floor((target - 1) / this.pool.blockSize);
    return this.index.acquire(req.id, req.tokens(0, target), most);
  }

  /** `req` was admitted holding `entries` (from share(), or none): it caches from there on. */
  admitted(req: Request, entries: PrefixEntry[]): void {
    this.held.set(req, { entries, stopped: false });
  }

  /** `req`'s blocks are no longer its own (offloaded, or its oldest dropped): it caches no more. */
  stop(req: Request): void {
    const cached = this.held.get(req);
    if (cached) cached.stopped = true;
  }

  /** Offers every full block of `req` whose tokens are known and whose KV is written. */
  offer(req: Request): void {
    const cached = this.held.get(req);
    if (!cached) return;
    const B = this.pool.blockSize;
    const known = Math.min(req.computed, req.promptLength + req.generated.length);
    const { entries } = cached;
    for (let i = entries.length; !cached.stopped && (i + 1) * B <= known; i++) {
      const blocks = Array.from(
        { length: this.pool.numLayers },
        (_, layer) => this.pool.table(req.id, layer)[i],
      );
      // Freed behind a sliding window before its tokens were known: it caches no more.
      if (blocks.some((b) => b < 0)) {
        cached.stopped = true;
        break;
      }
      const parent = entries[i - 1] ?? null;
      const entry = this.index.insert(parent, req.tokens(i * B, (i + 1) * B), blocks);
      // Another request cached these tokens first, in its own blocks. Chaining ours after its
      // entry would let a cached block we hold hang under an entry nobody holds, which the index
      // could then never evict; so this request caches no further blocks.
      if (entry.blocks!.some((b, layer) => b !== blocks[layer])) cached.stopped = true;
      else entries.push(entry);
    }
  }

  stats(): PrefixStats {
    return this.index.stats();
  }
}
