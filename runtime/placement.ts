// Where running requests' layers live (`--offload`, and slo's `--layerwise-prefill`): the
// distance each running request should have, asked of a planner (OrbitFlow), the same for all
// (uniform), or none; and LayerKV's layer-wise admission, which lets in a request whose whole KV
// does not fit yet by offloading some of its layers from the start. The offloader (kv/offload.ts)
// carries the distances out.
//
// Layer-wise admission: a waiting request whose full admission KV does not fit on the device is
// admitted at the largest distance (fewest layers on the host) whose resident layers fit in full
// and whose offloaded layers fit their first prefill chunk. Its offloaded layers then grow chunk
// by chunk as the prefill writes them and leave the device as their copies to the host land, so
// its peak device footprint stays well below its full KV. It keeps at least that many layers
// offloaded until it has prefilled; then the planner's or uniform distance (or, with neither, 0
// once the device has room) takes over.

import type { BlockPool } from "./kv/block_pool.ts";
import type { Offloader } from "./kv/offload.ts";
import type { PrefixEntry } from "./kv/prefix_index.ts";
import type { OffloadPlanner } from "./plan/offload_planner.ts";
import { candidateDistances, isOffloaded, offloadedCount } from "./plan/offload_pattern.ts";
import type { PrefixCache } from "./prefix_cache.ts";
import type { Request } from "./request/request.ts";

export interface PlacementOptions {
  /** The distance each running request should have, without a planner (absent: 0). */
  distance?: (req: Request) => number;
  /** A planner choosing distances for the whole batch; takes precedence over `distance`. */
  planner?: OffloadPlanner;
  /** LayerKV's layer-wise prefill (`--layerwise-prefill`). */
  layerwisePrefill?: boolean;
}

export class Placement {
  /** Requests admitted layer-wise (some layers offloaded) because their KV did not fit. */
  layerwiseAdmissions = 0;
  /** Layer-wise admissions still prefilling, with the distance they were admitted at. */
  private readonly layerwise = new Map<Request, number>();

  constructor(
    private readonly pool: BlockPool,
    readonly offloader: Offloader,
    private readonly maxRows: number,
    private readonly options: PlacementOptions = {},
    private readonly prefix: PrefixCache | null = null,
  ) {}

  /** False while the planner's last plan needed a pause: admissions wait. */
  get feasible(): boolean {
    return this.options.planner?.feasible?.() !== false;
  }

  /** Running requests no feasible plan could keep. */
  toPause(running: readonly Request[]): Request[] {
    return this.options.planner?.toPause?.(running) ?? [];
  }

  /**
   * Layer-wise admission: grows `req`'s tables so that the layers distance d keeps on the device
   * hold its whole admission KV (`full` positions) and the layers it offloads hold the first
   * prefill chunk, for the largest d (fewest layers on the host) whose blocks are free now.
   * Returns d, or 0 (nothing grown) when layer-wise prefill is off, does not apply, or no
   * distance fits. A swapped request (its host copy comes back whole) and one resuming in place
   * (its layout holds DROPPED entries, which offloading cannot have) are admitted only whole.
   * `prefix`: the cached blocks already shared into its tables, which its first chunk starts after.
   */
  growLayerwise(req: Request, prefix: readonly PrefixEntry[], full: number): number {
    if (!this.options.layerwisePrefill || req.swapped || req.dropped > 0) return 0;
    const L = this.pool.numLayers;
    const cached = Math.min(prefix.length * this.pool.blockSize, req.prefillTarget - 1);
    // The first chunk: the most rows one step gives a prefill (a step may give it fewer, then
    // its offloaded layers grow for the rest as it goes).
    const first = Math.min(full, cached + this.maxRows);
    if (first >= full) return 0; // one chunk is the whole prompt: offloading saves nothing
    // candidateDistances: 0, then ever more layers offloaded (the widest stride for each count).
    for (const d of candidateDistances(L).filter((d) => d > 0)) {
      const tokens = Array.from({ length: L }, (_, l) => isOffloaded(d, l) ? first : full);
      if (this.pool.growEach(req.id, tokens)) return d;
    }
    return 0;
  }

  /** `req` was just admitted layer-wise at `distance` (growLayerwise's). */
  admittedLayerwise(req: Request, distance: number): void {
    // Nothing is offloaded yet, so this only records the distance: it cannot fail.
    if (!this.setDistance(req, distance)) {
      throw new Error(`request ${req.id}: layer-wise admission at distance ${distance} refused`);
    }
    this.layerwise.set(req, distance);
    this.layerwiseAdmissions++;
  }

  /**
   * Before a step's rows: gives running requests the distance asked for (a refilling request
   * waits), then frees landed offloaded blocks and copies newly full ones out.
   */
  beforeStep(running: readonly Request[]): void {
    const { planner } = this.options;
    planner?.beforeStep(running);
    const want = planner ? (req: Request) => planner.distanceOf(req) : this.options.distance;
    const L = this.pool.numLayers;
    for (const req of running) {
      // Without a planner or uniform distance every layer belongs on the device (distance 0):
      // only layer-wise admissions ever leave it.
      let d = want ? want(req) : 0;
      const admitted = this.layerwise.get(req);
      if (admitted !== undefined) {
        // While it prefills, a layer-wise admission keeps at least as many layers offloaded as it
        // was admitted with (its blocks were counted so); a distance offloading more may replace
        // it. Once it decodes, the asked-for distance takes over (setDistance waits for room).
        if (req.state !== "prefilling") this.layerwise.delete(req);
        else if (offloadedCount(d, L) < offloadedCount(admitted, L)) d = admitted;
      }
      if (this.offloader.distanceOf(req) !== d && !req.refill) this.setDistance(req, d);
    }
    this.offloader.beginStep(running);
  }

  /** Claims prefetch room for `req`'s offloaded layers in this step; false: it sits it out. */
  claim(req: Request): boolean {
    return this.offloader.claimRegion(req);
  }

  /** True when some of `req`'s layers live on the host. */
  offloads(req: Request): boolean {
    return this.offloader.offloads(req);
  }

  /**
   * `req` left the batch: its placement goes, and its layers' copies out too unless
   * `keepCopiesOut` (a swap-out counted on them).
   */
  forget(req: Request, keepCopiesOut: boolean): void {
    this.offloader.forget(req, keepCopiesOut);
    this.layerwise.delete(req);
  }

  /** The step's prefetches and the table entries pointing there. */
  take() {
    return this.offloader.take();
  }

  /** Sets `req`'s distance; its offloaded layers' blocks then leave the device, uncached. */
  private setDistance(req: Request, distance: number): boolean {
    const set = this.offloader.setDistance(req, distance);
    if (set && distance > 0) this.prefix?.stop(req);
    return set;
  }
}
