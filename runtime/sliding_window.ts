// A sliding window's KV in the runtime (Mistral): a row at position p reads only positions
// p - W + 1..p, and a request's rows only move forward (the next one is at `computed`), so its
// leading blocks that lie wholly before position computed - W + 1 are never read again. They go
// back to the pool as soon as it runs a step, their table entries reading EXPIRED; the engine's
// attention never reads below the window (shaders/attention.wgsl), so its stale entries are safe.
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

/**
 * In a table: a block freed because it lies wholly before the window of every row its request
 * will still compute. Never refilled (the engine never reads it again); its entry keeps later
 * entries' positions.
 */
export const EXPIRED = -3;
import type { Request } from "./request/request.ts";

export class SlidingWindow {
  /** Table entries released because they fell behind the window (per layer, summed). */
  released = 0;

  constructor(private readonly pool: BlockPool, readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`bad sliding window ${size}`);
  }

  /** Frees `req`'s leading blocks that lie wholly before the window of its next row. */
  expire(req: Request): void {
    const firstRead = req.computed - this.size + 1;
    const before = Math.floor(Math.max(0, firstRead) / this.pool.blockSize);
    if (before > this.pool.leading(req.id, EXPIRED)) {
      this.released += this.pool.releaseLeading(req.id, before, EXPIRED);
    }
  }
}
