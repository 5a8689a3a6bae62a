// The host tier of the KV cache, as bookkeeping: the host pool (which host block holds what), the
// copies between the tiers that the next step carries, and what each copy makes true once the step
// carrying it has been delivered (it has "landed"). No bytes here: the engine moves them
// (engine/kv/kv_transfers.ts); this file decides nothing either. Three kinds of work queue copies:
//
//   swaps (kv/swap.ts)          a request's whole KV out (swap-out, write-through) and back in;
//   layers (kv/offload.ts)      offloaded layers' full blocks out as they are written, and layers
//                               brought back to the device in;
//   the cache (kv/prefix_tier.ts)  prefix-cache entries demoted to the host and promoted back.
//
// They meet here because a request's host copy is one set of host blocks, whoever filled it: a copy
// out of a layer starts after the blocks already on the host or on their way (blocksOut), and
// nothing copies a device block out while a queued copy in has not filled it yet (filling). A
// request's host extent is its first `hostIssued` positions once the copies in flight land
// (`hostTokens` once landed; both on the request), and, per offloaded layer, its leading full
// blocks. A release voids both, and copies still in flight then land in blocks no longer its own
// (the request's host epoch moves on).
//
// A step carries the queued copies in three lanes, in this order: swaps, the cache's, the layers'.

import type { KvCopy } from "../../engine/engine.ts";
import { BlockPool } from "./block_pool.ts";
import type { Request } from "../request/request.ts";

/** Copies out that land when the step carrying them is delivered. */
export type Landing = RequestLanding | LayerLanding | { landed: () => void };

/** A swap-out or write-through of a request's first `tokens` positions. */
export interface RequestLanding {
  req: Request;
  tokens: number;
  /** The request's host epoch when the copies were issued: a landing from before a release is void. */
  epoch: number;
}

/** Copies out of an offloaded layer: its first `blocks` blocks are on the host once it lands. */
export interface LayerLanding {
  req: Request;
  layer: number;
  blocks: number;
  epoch: number;
  extent: LayerExtent;
}

/**
 * One layer's host copy, in leading full blocks: copied out, and landed. It outlives distance
 * changes (full blocks never change), so a layer offloaded again moves only what is new; it is
 * void once the request's host blocks are released (its host epoch moves on).
 */
export interface LayerExtent {
  issued: number;
  landed: number;
}

/** A copy queued for the next step, with the request whose blocks it moves. */
interface Queued {
  req: Request;
  copy: KvCopy;
}

/** A group of the prefix cache's copies, and the host table holding what its copies in read. */
interface CacheCopies {
  owner: object;
  copies: KvCopy[];
  landed?: () => void;
  reads: string;
}

export class HostTier {
  /** Host blocks: one arena, shared by every layer. */
  readonly pool: BlockPool;
  private swaps: Queued[] = [];
  private swapLandings: RequestLanding[] = [];
  /** The prefix cache's copies for the next step, by the entry they move. */
  private cache: CacheCopies[] = [];
  private layers: Queued[] = [];
  /** Copies out of offloaded layers that run right after their layer's kernels, this step. */
  private layersAfter: Queued[] = [];
  private layerLandings: LayerLanding[] = [];
  /** Per request, its host epoch and each offloaded layer's host copy. */
  private readonly layerCopies = new Map<
    Request,
    { epoch: number; layers: Map<number, LayerExtent> }
  >();
  private nextReads = 0;

  /** A tier of `hostBlocks` blocks beside the `device` pool (at least one, so the pool is valid). */
  constructor(private readonly device: BlockPool, hostBlocks: number) {
    this.pool = new BlockPool({
      blocksPerArena: [Math.max(1, hostBlocks)],
      layerArena: device.layerArena.map(() => 0),
      blockSize: device.blockSize,
    });
  }

  // ---- a request's whole KV (swaps, write-through) ----

  /**
   * Copies `req`'s blocks from index `fromBlock` up to position `tokens` out, each layer from after
   * what it has on the host already; returns the blocks moved. Its host blocks must be allocated.
   */
  copyOut(req: Request, fromBlock: number, tokens: number): number {
    const n = this.device.blocksFor(tokens);
    if (n <= fromBlock) return 0;
    let moved = 0;
    for (let layer = 0; layer < this.device.numLayers; layer++) {
      // An offloaded layer's leading blocks are on the host already (or on their way).
      const from = Math.max(fromBlock, this.blocksOut(req, layer));
      if (from >= n) continue;
      this.swaps.push({ req, copy: this.copy("out", req, layer, from, n) });
      moved += n - from;
    }
    this.swapLandings.push({ req, tokens, epoch: req.hostEpoch });
    req.hostCopyIssued(tokens);
    return moved;
  }

  /**
   * Copies `req`'s first `tokens` positions from the host into the device blocks it now holds;
   * returns the blocks moved per layer.
   */
  copyIn(req: Request, tokens: number): number {
    const n = this.device.blocksFor(tokens);
    for (let layer = 0; layer < this.device.numLayers; layer++) {
      this.swaps.push({ req, copy: this.copy("in", req, layer, 0, n) });
    }
    return n;
  }

  /**
   * Drops `req`'s queued copies in: it leaves before they have run, so its host copy, untouched,
   * stays whole. (Its copies out stay: they run first.) True when there were any.
   */
  dropCopiesIn(req: Request): boolean {
    const before = this.swaps.length;
    this.swaps = this.swaps.filter((c) => c.req !== req || c.copy.direction === "out");
    return this.swaps.length < before;
  }

  /**
   * Drops `req`'s queued copies out (a write-through) and their landings: a swap-out that copies
   * everything again writes the same host blocks, and a step may write a host block only once.
   * Returns the blocks they would have moved.
   */
  dropCopiesOut(req: Request): number {
    const dropped = this.swaps.filter((c) => c.req === req && c.copy.direction === "out");
    this.swaps = this.swaps.filter((c) => !dropped.includes(c));
    this.swapLandings = this.swapLandings.filter((l) => l.req !== req);
    return dropped.reduce((n, c) => n + c.copy.deviceBlocks.length, 0);
  }

  /** Frees `req`'s host blocks (it finished, or its host copy is no longer wanted). */
  release(req: Request): void {
    this.swaps = this.swaps.filter((c) => c.req !== req);
    this.swapLandings = this.swapLandings.filter((l) => l.req !== req);
    this.pool.release(req.id);
    req.releaseHostCopy(); // copies still in flight now land in blocks that are no longer its own
  }

  // ---- offloaded layers ----

  /**
   * Leading blocks of `layer` that are on the host or on their way there, by a swap's copy or the
   * layer's own: copies out of the layer start after them.
   */
  blocksOut(req: Request, layer: number): number {
    const bySwaps = Math.floor(req.hostIssued / this.device.blockSize);
    return Math.max(bySwaps, this.layerExtent(req, layer).issued);
  }

  /** The layer's host copy, void (reset) when the request's host blocks were released since. */
  layerExtent(req: Request, layer: number): LayerExtent {
    let copy = this.layerCopies.get(req);
    if (!copy || copy.epoch !== req.hostEpoch) {
      this.layerCopies.set(req, copy = { epoch: req.hostEpoch, layers: new Map() });
    }
    let extent = copy.layers.get(layer);
    if (!extent) copy.layers.set(layer, extent = { issued: 0, landed: 0 });
    return extent;
  }

  /**
   * Copies `layer`'s blocks the host lacks, up to block `toBlock`, out (growing its host table);
   * returns the blocks moved (0 when there are none, or the host has no room). `afterLayer`: the
   * copy runs in the step being built, right after the layer's kernels (it may copy what they
   * write); else before the step's kernels.
   */
  copyLayerOut(req: Request, layer: number, toBlock: number, afterLayer = false): number {
    const from = this.blocksOut(req, layer);
    if (toBlock <= from || !this.pool.grow(req.id, layer, toBlock * this.device.blockSize)) {
      return 0;
    }
    const queue = afterLayer ? this.layersAfter : this.layers;
    queue.push({ req, copy: this.copy("out", req, layer, from, toBlock) });
    const extent = this.layerExtent(req, layer);
    extent.issued = toBlock;
    this.layerLandings.push({ req, layer, blocks: toBlock, epoch: req.hostEpoch, extent });
    return toBlock - from;
  }

  /** Copies a layer's host KV into the device blocks it was given back (entry index, block). */
  copyLayerIn(req: Request, layer: number, restored: readonly { index: number; block: number }[]) {
    const hostTable = this.pool.table(req.id, layer);
    this.layers.push({
      req,
      copy: {
        direction: "in",
        layer,
        deviceBlocks: restored.map((r) => r.block),
        hostBlocks: restored.map((r) => hostTable[r.index]),
      },
    });
  }

  /**
   * Forgets `req`'s layer copies: it left the batch and its device blocks are gone. Its copies in go
   * with it; its copies out stay when `keepCopiesOut` (its host copy is kept: a swap-out counted on
   * them), else they go too, with their landings and its layers' host extents.
   */
  forgetLayers(req: Request, keepCopiesOut: boolean): void {
    this.layers = this.layers.filter((c) =>
      c.req !== req || (keepCopiesOut && c.copy.direction === "out")
    );
    this.layersAfter = this.layersAfter.filter((c) => c.req !== req || keepCopiesOut);
    if (keepCopiesOut) return;
    this.layerLandings = this.layerLandings.filter((l) => l.req !== req);
    this.layerCopies.delete(req);
  }

  // ---- the prefix cache's entries ----

  /**
   * Queues copies of the prefix cache's (`owner`: the entry they move) for the next step; `landed`
   * is called once that step is delivered. The host blocks copies in read stay held until then.
   */
  cacheCopy(owner: object, copies: KvCopy[], landed?: () => void): void {
    this.cache.push({ owner, copies, landed, reads: this.holdReads(copies) });
  }

  /**
   * Drops `owner`'s queued cache copies that `which` picks (their blocks are being freed), with
   * the landing of a group it empties. Returns the blocks they would have moved.
   */
  dropCacheCopies(owner: object, which: (copy: KvCopy) => boolean): number {
    let dropped = 0;
    for (const group of this.cache) {
      if (group.owner !== owner || !group.copies.some(which)) continue;
      for (const c of group.copies) if (which(c)) dropped += c.deviceBlocks.length;
      group.copies = group.copies.filter((c) => !which(c));
      // Held anew before the old hold goes, so that no block the rest read is freed meanwhile.
      const reads = this.holdReads(group.copies);
      this.pool.release(group.reads);
      group.reads = reads;
    }
    this.cache = this.cache.filter((g) => g.copies.length > 0);
    return dropped;
  }

  /**
   * True when `req` holds a device block that a queued cache copy in fills: its KV is not there
   * until the next step's copies have run, and copies out run before copies in.
   */
  filling(req: Request): boolean {
    for (const c of this.cache.flatMap((g) => g.copies)) {
      if (c.direction !== "in") continue;
      const table = this.device.table(req.id, c.layer);
      if (c.deviceBlocks.some((b) => table.includes(b))) return true;
    }
    return false;
  }

  // ---- the step ----

  /**
   * The copies and landings the next step carries (`afterLayer`: the copies out that run right
   * after their layer's kernels); the queues start empty again.
   */
  take(): { copies: KvCopy[]; landings: Landing[]; afterLayer: KvCopy[] } {
    const out = {
      afterLayer: this.layersAfter.map((c) => c.copy),
      copies: [
        ...this.swaps.map((c) => c.copy),
        ...this.cache.flatMap((g) => g.copies),
        ...this.layers.map((c) => c.copy),
      ],
      landings: [
        ...this.swapLandings,
        ...this.cache.flatMap((g) => g.landed ? [{ landed: g.landed }] : []),
        ...this.layerLandings,
      ],
    };
    this.swaps = [];
    this.swapLandings = [];
    // The step reads the host blocks when it is submitted, right after it is built.
    for (const g of this.cache) this.pool.release(g.reads);
    this.cache = [];
    this.layers = [];
    this.layersAfter = [];
    this.layerLandings = [];
    return out;
  }

  /** Marks the copies of a delivered step as landed (unless their request's copy was released). */
  land(landings: readonly Landing[]): void {
    for (const l of landings) {
      if ("landed" in l) l.landed();
      else if ("layer" in l) {
        const copy = this.layerCopies.get(l.req);
        if (l.epoch !== l.req.hostEpoch || copy?.layers.get(l.layer) !== l.extent) continue;
        l.extent.landed = Math.max(l.extent.landed, l.blocks);
      } else l.req.hostCopyLanded(l.tokens, l.epoch);
    }
  }

  /** Holds the host blocks `copies` read (copies in) under a new table id; returns the id. */
  private holdReads(copies: readonly KvCopy[]): string {
    const reads = `prefix-cache-reads-${this.nextReads++}`;
    for (const c of copies) if (c.direction === "in") this.pool.share(reads, c.layer, c.hostBlocks);
    return reads;
  }

  /** A copy of `req`'s blocks [from, to) of `layer` between its device and host tables. */
  private copy(dir: "in" | "out", req: Request, layer: number, from: number, to: number): KvCopy {
    return {
      direction: dir,
      layer,
      deviceBlocks: this.device.table(req.id, layer).slice(from, to),
      hostBlocks: this.pool.table(req.id, layer).slice(from, to),
    };
  }
}
