// Moves requests' KV between the device pool and the host tier (FastSwitch, TokenFlow). Pure
// bookkeeping: it decides which blocks move, records the copies for the next step's plan, and
// learns when a copy out has landed (the step that carried it has been delivered).
//
// A request's host copy covers its first `hostTokens` positions once landed (`hostIssued` once
// the copies in flight land). Host copies stay valid after a swap-in, and full blocks never change,
// so swapping a request out again copies only the blocks from its last partial one on (reuse);
// write-through copies full blocks ahead of time, so a later swap-out moves almost nothing.
//
// The prefix cache's host tier (runtime/prefix_tier.ts) sends its copies through here too, so they
// ride in the same steps: they belong to cache entries, not requests, and a request's KV that such
// a copy brings in is not there before that step runs, so nothing copies it out before then.

import type { KvCopy } from "../engine/engine.ts";
import type { BlockPool } from "../engine/kv/block_pool.ts";
import type { Request } from "./request.ts";

/** Copies out that land when the step carrying them is delivered: a request's, or the cache's. */
export type Landing = RequestLanding | { landed: () => void };

export interface RequestLanding {
  req: Request;
  tokens: number;
  /** The request's host epoch when the copies were issued: a landing from before a release is void. */
  epoch: number;
}

/** A group of the prefix cache's copies, and the host table holding what its copies in read. */
interface CacheCopies {
  owner: object;
  copies: KvCopy[];
  landed?: () => void;
  reads: string;
}

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
  /** Copies for the next step, each with the request whose blocks it moves. */
  private copies: { req: Request; copy: KvCopy }[] = [];
  private landings: RequestLanding[] = [];
  /** The prefix cache's copies for the next step, by the entry they move. */
  private cacheCopies: CacheCopies[] = [];
  private nextReads = 0;
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
  /**
   * @param outFrom leading blocks of a request's layer already on the host or on their way there
   *   by other means (an offloaded layer's): copies out of that layer start after them.
   */
  constructor(
    private readonly device: BlockPool,
    readonly host: BlockPool,
    private readonly reuse = true,
    private readonly outFrom: (req: Request, layer: number) => number = () => 0,
  ) {}

  /**
   * Copies out whatever of `req`'s device KV (its first `req.computed` positions) the host lacks.
   * False, with nothing changed, when the host tier has no room for it. The caller then frees the
   * device blocks: the copies run before anything else in the next step, so reuse is safe.
   */
  swapOut(req: Request): boolean {
    if (this.filling(req)) return false;
    const tokens = req.computed;
    // A request swapped in by this very step leaves before its copies in have run: they go, and
    // its host copy, untouched, stays whole. (Its copies out, write-through, stay: they run first.)
    this.copies = this.copies.filter((c) => c.req !== req || c.copy.direction === "out");
    if (!this.host.growAll(req.id, tokens)) return false;
    if (!this.reuse) req.hostIssued = 0;
    // Blocks the device has changed since the host copy: from its last partial block on.
    const moved = tokens > req.hostIssued
      ? this.copyOut(req, Math.floor(req.hostIssued / this.device.blockSize), tokens)
      : 0;
    this.stats.swapsOut++;
    this.stats.blocksOut += moved;
    if (req.swapsOut++ > 0) {
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
    const n = this.device.blocksFor(tokens);
    for (let layer = 0; layer < this.device.numLayers; layer++) {
      this.copies.push({
        req,
        copy: {
          direction: "in",
          layer,
          deviceBlocks: this.device.table(req.id, layer).slice(0, n),
          hostBlocks: this.host.table(req.id, layer).slice(0, n),
        },
      });
    }
    this.stats.swapsIn++;
    this.stats.blocksIn += n * this.device.numLayers;
  }

  /**
   * Mirrors up to `maxBlocks` (per layer) of `req`'s full blocks written before this step to the
   * host, when the host has free room; never evicts anything for it (not even cached prefixes).
   */
  writeThrough(req: Request, maxBlocks: number): void {
    const B = this.device.blockSize;
    const from = Math.floor(req.hostIssued / B);
    const to = Math.min(Math.floor(req.computed / B), from + maxBlocks);
    if (to <= from || this.filling(req)) return;
    const short = this.host.shortfall(req.id, to * B);
    if (short.some((n, arena) => n > this.host.freeIn(arena))) return;
    if (!this.host.growAll(req.id, to * B)) return;
    this.stats.blocksWrittenThrough += this.copyOut(req, from, to * B);
  }

  /** Marks the copies of a delivered step as landed. */
  land(landings: readonly Landing[]): void {
    for (const l of landings) {
      if ("landed" in l) l.landed();
      else if (l.epoch === l.req.hostEpoch) l.req.hostTokens = Math.max(l.req.hostTokens, l.tokens);
    }
  }

  /**
   * Queues copies of the prefix cache's (`owner`: the entry they move) for the next step; `landed`
   * is called once that step is delivered. The host blocks copies in read stay held until then.
   */
  cacheCopy(owner: object, copies: KvCopy[], landed?: () => void): void {
    this.cacheCopies.push({ owner, copies, landed, reads: this.holdReads(copies) });
  }

  /**
   * Drops `owner`'s queued cache copies that `which` picks (their blocks are being freed), with
   * the landing of a group it empties. Returns the blocks they would have moved.
   */
  dropCacheCopies(owner: object, which: (copy: KvCopy) => boolean): number {
    let dropped = 0;
    for (const group of this.cacheCopies) {
      if (group.owner !== owner || !group.copies.some(which)) continue;
      for (const c of group.copies) if (which(c)) dropped += c.deviceBlocks.length;
      group.copies = group.copies.filter((c) => !which(c));
      // Held anew before the old hold goes, so that no block the rest read is freed meanwhile.
      const reads = this.holdReads(group.copies);
      this.host.release(group.reads);
      group.reads = reads;
    }
    this.cacheCopies = this.cacheCopies.filter((g) => g.copies.length > 0);
    return dropped;
  }

  /** Holds the host blocks `copies` read (copies in) under a new table id; returns the id. */
  private holdReads(copies: readonly KvCopy[]): string {
    const reads = `prefix-cache-reads-${this.nextReads++}`;
    for (const c of copies) if (c.direction === "in") this.host.share(reads, c.layer, c.hostBlocks);
    return reads;
  }

  /**
   * True when `req` holds a device block that a queued cache copy in fills: its KV is not there
   * until the next step's copies have run, and copies out run before copies in.
   */
  filling(req: Request): boolean {
    for (const c of this.cacheCopies.flatMap((g) => g.copies)) {
      if (c.direction !== "in") continue;
      const table = this.device.table(req.id, c.layer);
      if (c.deviceBlocks.some((b) => table.includes(b))) return true;
    }
    return false;
  }

  /** Frees `req`'s host blocks (it finished, or its host copy is no longer wanted). */
  release(req: Request): void {
    this.copies = this.copies.filter((c) => c.req !== req);
    this.landings = this.landings.filter((l) => l.req !== req);
    this.host.release(req.id);
    req.hostTokens = 0;
    req.hostIssued = 0;
    req.hostEpoch++; // copies still in flight now land in blocks that are no longer its own
  }

  /** The copies and landings the next step carries. */
  take(): { copies: KvCopy[]; landings: Landing[] } {
    const out = {
      copies: [...this.copies.map((c) => c.copy), ...this.cacheCopies.flatMap((g) => g.copies)],
      landings: [
        ...this.landings,
        ...this.cacheCopies.flatMap((g) => g.landed ? [{ landed: g.landed }] : []),
      ],
    };
    this.copies = [];
    this.landings = [];
    // The step reads the host blocks when it is submitted, right after it is built.
    for (const g of this.cacheCopies) this.host.release(g.reads);
    this.cacheCopies = [];
    return out;
  }

  /** Copies blocks from index `fromBlock` up to position `tokens` out; returns blocks moved. */
  private copyOut(req: Request, fromBlock: number, tokens: number): number {
    const n = this.device.blocksFor(tokens);
    if (n <= fromBlock) return 0;
    let moved = 0;
    for (let layer = 0; layer < this.device.numLayers; layer++) {
      // An offloaded layer's leading blocks are on the host already (or on their way).
      const from = Math.max(fromBlock, this.outFrom(req, layer));
      if (from >= n) continue;
      this.copies.push({
        req,
        copy: {
          direction: "out",
          layer,
          deviceBlocks: this.device.table(req.id, layer).slice(from, n),
          hostBlocks: this.host.table(req.id, layer).slice(from, n),
        },
      });
      moved += n - from;
    }
    this.landings.push({ req, tokens, epoch: req.hostEpoch });
    req.hostIssued = tokens;
    return moved;
  }
}
