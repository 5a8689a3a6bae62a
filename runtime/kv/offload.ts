// Offload distance (OrbitFlow's executor, LayerKV's layer-wise placement). A running request with
// distance d keeps the KV of every d-th layer (layers d-1, 2d-1, ...) in the host tier: its full
// blocks are copied out as soon as they are written, and their device blocks are freed once the
// copy has landed. Each step then brings those host blocks into one shared device region just
// before the layer runs (the engine splits the step's compute pass there), so an offloaded layer
// costs the device only its newest, partly written block and the region, whoever holds it.
//
// Pure bookkeeping: it decides which blocks move; the host tier (kv/host_tier.ts) queues the copies
// for the next step and learns from delivered steps which have landed.
//
//   distance 0: keep every layer on the device (no offload);
//   distance d: layers L with (L + 1) % d === 0 are offloaded (d = 1: all of them).

import type { KvPrefetch, TableWrite } from "../../engine/engine.ts";
import type { BlockPool } from "./block_pool.ts";
import type { HostTier } from "./host_tier.ts";
import type { Request } from "../request/request.ts";
import { offloadedLayers } from "./offload_pattern.ts";

export interface OffloadStats {
  /** Full blocks copied out of offloaded layers as they were written. */
  blocksOut: number;
  /** Of those, blocks copied out in the step that wrote them, after their layer (layer-wise). */
  blocksOutAfterLayer: number;
  /** Blocks brought into the prefetch region, over all steps. */
  blocksPrefetched: number;
  /** Blocks brought back from the host when a distance change kept a layer on the device again. */
  blocksRestored: number;
  /** Steps a request sat out because the prefetch region could not hold its offloaded layers. */
  regionStalls: number;
}

/**
 * In a table: a block whose KV lives only in the host tier (an offloaded layer's full blocks).
 * grow() never refills it: the step brings it into the prefetch region instead.
 */
export const OFFLOADED = -2;

/** The pool's id for the blocks of the prefetch region. */
export const PREFETCH_REGION = "prefetch-region";

export class Offloader {
  readonly stats: OffloadStats = {
    blocksOut: 0,
    blocksOutAfterLayer: 0,
    blocksPrefetched: 0,
    blocksRestored: 0,
    regionStalls: 0,
  };
  /** Running requests' distances (absent: 0). */
  private readonly distances = new Map<Request, number>();
  /** Region blocks of each arena (the same blocks serve every layer of the arena in turn). */
  private readonly region: number[][];
  /** Table entries for the next step (restored blocks). */
  private tables: TableWrite[] = [];
  /** This step's region use: per layer, blocks handed out so far. */
  private regionUsed = new Map<number, number>();
  private assigned: { req: Request; layer: number; at: number; count: number }[] = [];

  /**
   * Reserves `regionBlocks` device blocks in every arena for the prefetch region. Throws when the
   * pool cannot spare them.
   */
  constructor(
    private readonly device: BlockPool,
    private readonly tier: HostTier,
    readonly regionBlocks: number,
  ) {
    const arenas = device.shape.blocksPerArena.length;
    this.region = Array.from({ length: arenas }, (_, a) => {
      const layer = device.layerArena.indexOf(a);
      if (layer < 0 || regionBlocks === 0) return [];
      const blocks = device.grow(PREFETCH_REGION, layer, regionBlocks * device.blockSize);
      if (!blocks) {
        throw new RangeError(
          `the device KV pool cannot spare ${regionBlocks} blocks of arena ${a} for the prefetch ` +
            `region (it has ${device.freeIn(a)} free)`,
        );
      }
      return blocks;
    });
  }

  /** Device blocks the region holds over all arenas (not any request's). */
  get regionTotal(): number {
    return this.region.reduce((n, r) => n + r.length, 0);
  }

  /** The request's offload distance (0: every layer on the device). */
  distanceOf(req: Request): number {
    return this.distances.get(req) ?? 0;
  }

  /** True when some of the request's layers live on the host. */
  offloads(req: Request): boolean {
    return this.distanceOf(req) > 0;
  }

  /**
   * Sets a running request's distance, moving only the difference: layers no longer offloaded get
   * device blocks again and their host KV copied in; newly offloaded ones start copying out at the
   * next step (blocks its host copy already has are not moved again). False, with nothing
   * changed, when the device lacks the blocks to bring layers back, or the request is refilling
   * dropped blocks and so has no offloadable layout.
   */
  setDistance(req: Request, distance: number): boolean {
    if (this.distanceOf(req) === distance) return true;
    if (!Number.isInteger(distance) || distance < 0) {
      throw new RangeError(`offload distance must be an integer >= 0, got ${distance}`);
    }
    const numLayers = this.device.numLayers;
    const wanted = new Set(offloadedLayers(distance, numLayers));
    if (distance > 0 && (req.refill || req.dropped > 0 || req.slot < 0)) return false;
    const back = Array.from({ length: numLayers }, (_, l) => l).filter((l) =>
      !wanted.has(l) && this.device.marked(req.id, l, OFFLOADED) > 0
    );
    const need = new Array(this.device.shape.blocksPerArena.length).fill(0);
    for (const l of back) {
      need[this.device.layerArena[l]] += this.device.marked(req.id, l, OFFLOADED);
    }
    if (need.some((n, a) => n > this.device.availableIn(a))) return false;

    for (const layer of back) {
      const restored = this.device.refill(req.id, layer, OFFLOADED)!;
      this.tier.copyLayerIn(req, layer, restored);
      for (const r of restored) {
        this.tables.push({ slot: req.slot, layer, first: r.index, blocks: [r.block] });
      }
      this.stats.blocksRestored += restored.length;
    }
    if (distance === 0) {
      this.distances.delete(req);
      return true;
    }
    this.distances.set(req, distance);
    return true;
  }

  /**
   * Forgets the request's placement: it left the batch and its device blocks are gone. Its copies
   * in go with it; its copies out this step stay when `keepCopiesOut` (its host copy is kept: a
   * swap-out counted on them), else they go too (its host blocks are released).
   */
  forget(req: Request, keepCopiesOut: boolean): void {
    this.distances.delete(req);
    this.assigned = this.assigned.filter((a) => a.req !== req);
    this.tier.forgetLayers(req, keepCopiesOut);
  }

  /**
   * Before a step's rows: frees the device blocks of offloaded layers whose host copy has landed,
   * then copies out every full block written by earlier steps that the host lacks.
   */
  beginStep(running: readonly Request[]): void {
    this.regionUsed = new Map();
    this.assigned = [];
    const B = this.device.blockSize;
    for (const req of running) {
      const distance = this.distanceOf(req);
      if (distance === 0 || this.tier.filling(req)) continue;
      const landedBySwaps = Math.floor(req.hostTokens / B);
      // Only as many leading blocks per layer as the region holds leave the device, so a request
      // always fits the region alone and never waits for it forever.
      const full = Math.min(Math.floor(req.computed / B), this.regionBlocks);
      for (const layer of offloadedLayers(distance, this.device.numLayers)) {
        const extent = this.tier.layerExtent(req, layer);
        const landed = Math.min(Math.max(extent.landed, landedBySwaps), full);
        const offloaded = this.device.marked(req.id, layer, OFFLOADED);
        if (landed > offloaded) this.device.vacate(req.id, layer, offloaded, landed, OFFLOADED);
        this.stats.blocksOut += this.tier.copyLayerOut(req, layer, full);
      }
    }
  }

  /**
   * After a step's rows (LayerKV's layer-wise offload, §3.1.1 and §4): copies out, within the step,
   * the blocks of offloaded layers that `inStep`'s rows have just filled, each right after its
   * layer's kernels: the copy of layer i runs while the layers after it compute, and lands with
   * this step rather than the next.
   */
  copyWritten(inStep: Iterable<Request>): void {
    const B = this.device.blockSize;
    for (const req of inStep) {
      const distance = this.distanceOf(req);
      if (distance === 0 || this.tier.filling(req)) continue;
      const full = Math.min(Math.floor(req.computed / B), this.regionBlocks);
      for (const layer of offloadedLayers(distance, this.device.numLayers)) {
        const n = this.tier.copyLayerOut(req, layer, full, true);
        this.stats.blocksOut += n;
        this.stats.blocksOutAfterLayer += n;
      }
    }
  }

  /**
   * Claims prefetch region room for `req`'s offloaded layers in this step. False (nothing claimed)
   * when the region is too small: the request sits this step out.
   */
  claimRegion(req: Request): boolean {
    const distance = this.distanceOf(req);
    if (distance === 0) return true;
    const counts = offloadedLayers(distance, this.device.numLayers).map((layer) =>
      [layer, this.device.marked(req.id, layer, OFFLOADED)] as const
    ).filter(([, n]) => n > 0);
    const fits = counts.every(([layer, n]) =>
      (this.regionUsed.get(layer) ?? 0) + n <= this.regionBlocks
    );
    if (!fits) {
      this.stats.regionStalls++;
      return false;
    }
    for (const [layer, count] of counts) {
      const at = this.regionUsed.get(layer) ?? 0;
      this.regionUsed.set(layer, at + count);
      this.assigned.push({ req, layer, at, count });
    }
    return true;
  }

  /**
   * The step's prefetches: the claimed region room, brought in from the host, with the table
   * entries pointing there (after those of restored blocks).
   */
  take(): { prefetch: KvPrefetch[]; tables: TableWrite[] } {
    const prefetch: KvPrefetch[] = [];
    const tables = this.tables;
    for (const { req, layer, at, count } of this.assigned) {
      const region = this.region[this.device.layerArena[layer]].slice(at, at + count);
      const table = this.device.table(req.id, layer);
      if (table.slice(0, count).some((b) => b !== OFFLOADED)) {
        throw new Error(`request ${req.id} layer ${layer}: region claimed for resident blocks`);
      }
      prefetch.push({
        layer,
        deviceBlocks: region,
        hostBlocks: this.tier.pool.table(req.id, layer).slice(0, count),
      });
      tables.push({ slot: req.slot, layer, first: 0, blocks: region });
      this.stats.blocksPrefetched += count;
    }
    this.tables = [];
    this.assigned = [];
    return { prefetch, tables };
  }
}
