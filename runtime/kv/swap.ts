// Swapping a request's KV between the device pool and the host tier (FastSwitch, TokenFlow): what
// moves when a request is preempted to the host, brought back, or mirrored ahead of time. The host
// tier (kv/host_tier.ts) queues the copies and learns when they land.
//
// Host copies stay valid after a swap-in, and full blocks never change, so swapping a request out
// again copies only the blocks from its last partial one on (reuse); write-through copies full
// blocks ahead of time, so a later swap-out moves almost nothing.

import type { Request } from "../request/request.ts";
import type { HostTier } from "./host_tier.ts";

export interface SwapStats {
  swapsOut: number;
  swapsIn: number;
  /** Blocks copied each way (one block = one layer's K and V for blockSize positions). */
  blocksOut: number;
  blocksIn: number;
  /** Blocks written through ahead of any swap. */
  blocksWrittenThrough: number;
  /** Swap-outs of requests swapped out before, and the blocks they moved (reuse shows here). */
  repeatSwapsOut: number;
  repeatBlocksOut: number;
}

export class Swapper {
  readonly stats: SwapStats = {
    swapsOut: 0,
    swapsIn: 0,
    blocksOut: 0,
    blocksIn: 0,
    blocksWrittenThrough: 0,
    repeatSwapsOut: 0,
    repeatBlocksOut: 0,
  };

  /**
   * @param reuse keep host copies valid after a swap-in, so a second swap-out moves only the new
   *   KV (FastSwitch); false copies everything again each time (the baseline).
   */
  constructor(private readonly tier: HostTier, private readonly reuse = true) {}

  /**
   * Copies out whatever of `req`'s device KV (its first `req.computed` positions) the host lacks.
   * False, with nothing changed, when the host tier has no room for it. The caller then frees the
   * device blocks: the copies run before anything else in the next step, so reuse is safe.
   */
  swapOut(req: Request): boolean {
    if (this.tier.filling(req)) return false;
    const tokens = req.computed;
    // A request swapped in by this very step leaves before its copies in have run: its device
    // blocks hold nothing yet, and its host copy, untouched, is whole.
    const swappedInNow = this.tier.dropCopiesIn(req);
    if (!this.tier.pool.growAll(req.id, tokens)) return false;
    if (!this.reuse && !swappedInNow) {
      // Everything is copied again, in place of this step's write-through to the same blocks.
      this.stats.blocksWrittenThrough -= this.tier.dropCopiesOut(req);
      req.restartHostCopy();
    }
    // Blocks the device has changed since the host copy: from its last partial block on.
    const moved = tokens > req.hostIssued
      ? this.tier.copyOut(req, Math.floor(req.hostIssued / this.tier.pool.blockSize), tokens)
      : 0;
    this.stats.swapsOut++;
    this.stats.blocksOut += moved;
    if (req.countSwapOut() > 1) {
      this.stats.repeatSwapsOut++;
      this.stats.repeatBlocksOut += moved;
    }
    return true;
  }

  /**
   * Copies `req`'s first `tokens` positions from the host into the device blocks it now holds
   * (allocated by the caller).
   */
  swapIn(req: Request, tokens: number): void {
    const n = this.tier.copyIn(req, tokens);
    this.stats.swapsIn++;
    this.stats.blocksIn += n * this.tier.pool.numLayers;
  }

  /**
   * Mirrors up to `maxBlocks` (per layer) of `req`'s full blocks written before this step to the
   * host, when the host has free room; never evicts anything for it (not even cached prefixes).
   */
  writeThrough(req: Request, maxBlocks: number): void {
    const host = this.tier.pool;
    const B = host.blockSize;
    const from = Math.floor(req.hostIssued / B);
    const to = Math.min(Math.floor(req.computed / B), from + maxBlocks);
    if (to <= from || this.tier.filling(req)) return;
    const short = host.shortfall(req.id, to * B);
    if (short.some((n, arena) => n > host.freeIn(arena))) return;
    if (!host.growAll(req.id, to * B)) return;
    this.stats.blocksWrittenThrough += this.tier.copyOut(req, from, to * B);
  }
}
