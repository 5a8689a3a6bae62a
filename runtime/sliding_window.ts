// A sliding window's KV in the runtime (Mistral on every layer, Gemma on its local layers): a row
// of a windowed layer at position p reads only positions p - W + 1..p, and a request's rows only
// move forward (the next one is at `computed`), so that layer's leading blocks that lie wholly
// before position computed - W + 1 are never read again. They go back to the pool as soon as it
// runs a step, their table entries reading EXPIRED; the engine's attention never reads below the
// window (shaders/attention.wgsl), so its stale entries are safe. Layers without a window (Gemma's
// global ones) keep every block; the pool is shared by all layers, so what a local layer frees
// any layer can use.
//
// How it meets the rest of the runtime:
//   - prefix cache: blocks are offered as they fill, before they leave the window, so a prompt's
//     prefix is still cached; an expired cached block stays in the index (idle) for others. A
//     request offers no more once it meets an expired entry (prefix_cache.ts).
//   - preemption: a request with expired blocks is preempted whole (recompute), never by dropping
//     its oldest blocks (preemption.ts), and resumes by prefilling again, freeing as it goes.
//   - the host tier, offloading and token-wise caching move or recompute tables by position: with
//     any of them on, blocks are kept (attention is still windowed; only memory is not saved).

import type { BlockPool } from "./kv/block_pool.ts";
import type { Request } from "./request/request.ts";

/**
 * In a table: a block freed because it lies wholly before the window of every row its request
 * will still compute. Never refilled (the engine never reads it again); its entry keeps later
 * entries' positions.
 */
export const EXPIRED = -3;

export class SlidingWindow {
  /** Table entries released because they fell behind the window (per layer, summed). */
  released = 0;
  private readonly windowed: number[]; // the layers with a window

  /** `windows[layer]`: positions a row of that layer attends to, 0 for all before it. */
  constructor(private readonly pool: BlockPool, readonly windows: readonly number[]) {
    if (windows.length !== pool.numLayers) {
      throw new RangeError(`${windows.length} windows for ${pool.numLayers} layers`);
    }
    for (const w of windows) {
      if (!Number.isInteger(w) || w < 0) throw new RangeError(`bad sliding window ${w}`);
    }
    this.windowed = windows.flatMap((w, layer) => w > 0 ? [layer] : []);
  }

  /** The runtime's windows for `shape`, or null when no layer has one. */
  static of(pool: BlockPool, shape: WindowShape): SlidingWindow | null {
    const windows = shape.layerWindows ??
      new Array(pool.numLayers).fill(shape.slidingWindow ?? 0);
    return windows.some((w) => w > 0) ? new SlidingWindow(pool, windows) : null;
  }

  /** Frees `req`'s leading blocks, on each windowed layer, wholly before that layer's next read. */
  expire(req: Request): void {
    for (const layer of this.windowed) {
      const firstRead = req.computed - this.windows[layer] + 1;
      const before = Math.floor(Math.max(0, firstRead) / this.pool.blockSize);
      const upTo = Math.min(before, this.pool.table(req.id, layer).length);
      const done = this.pool.leading(req.id, layer, EXPIRED);
      if (upTo > done) {
        this.pool.vacate(req.id, layer, done, upTo, EXPIRED);
        this.released += upTo - done;
      }
    }
  }

  /** Whether `req` has freed any block behind a window (it can then only be preempted whole). */
  hasExpired(req: Request): boolean {
    return this.windowed.some((layer) => this.pool.leading(req.id, layer, EXPIRED) > 0);
  }
}

/** Where the windows come from: the engine's per-layer ones, else one for every layer. */
export interface WindowShape {
  /** The model's sliding window on every layer (Mistral), if it has one. */
  slidingWindow?: number | null;
  /** Each layer's window, 0 for none (Gemma's local layers); absent: slidingWindow on all. */
  layerWindows?: readonly number[];
}
