// Where running requests' layers live (`--offload`, and `--layerwise-prefill`): the distance each
// running request should have, asked of a planner (OrbitFlow), the same for all (uniform), or
// none; and LayerKV's layer-wise prefill, which gives every prefill a layer split: some layers'
// KV kept on the device, the rest offloaded from the start. The offloader (kv/offload.ts) carries
// the distances out.
//
// Layer-wise prefill: each waiting request is admitted at the split runtime/layer_split.ts
// chooses from the cost model and the free blocks (the fewest layers kept whose copies hide,
// §3.1.1): its kept layers get its whole admission KV, its offloaded layers their first chunk,
// grown chunk by chunk as the prefill writes them and leaving the device as their copies to the
// host land. It keeps at least that many layers offloaded until it has prefilled; then the
// planner's or uniform distance takes over, or, with neither, LayerKV's own rule: before each
// step the Eq. 5 forecast of the running requests' growth is checked against the blocks the
// queue's head was refused; when it runs short the newest requests' kept layers go to the host,
// x/2 then x (layer_split.ts's relieve), and while it has room to spare beyond that, offloaded
// layers come back, oldest request first (kept on the device as memory allows: §5.2.3).

import type { BlockPool } from "./kv/block_pool.ts";
import type { Offloader } from "./kv/offload.ts";
import type { PrefixEntry } from "./kv/prefix_index.ts";
import type { OffloadPlanner } from "./plan/offload_planner.ts";
import { forecastLowest, type Grower, layerSplit, relieve } from "./layer_split.ts";
import {
  candidateDistances,
  isOffloaded,
  offloadedCount,
  offloadedLayers,
} from "./kv/offload_pattern.ts";
import type { PolicyContext } from "./policy/policy.ts";
import { prefillSteps } from "./policy/slo.ts";
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

/** Stages (steps) the Eq. 5 forecast looks ahead at most. */
const HORIZON = 4096;
/** Steps a request's layers stay where Eq. 5's rule last put them. */
const SETTLE = 8;

export class Placement {
  /** Requests admitted layer-wise (some layers offloaded). */
  layerwiseAdmissions = 0;
  /** Prefills given a layer split (layerSplit), whole ones included. */
  prefillSplits = 0;
  /** Each request's last split: the layers it kept on the device. */
  private readonly splits = new WeakMap<Request, number>();
  /** Layer-wise admissions still prefilling, with the distance they were admitted at. */
  private readonly layerwise = new Map<Request, number>();
  /** Device blocks the split the queue's head was last refused takes (0: none was refused). */
  private refusedBlocks = 0;
  /** Kept layers sent to the host by Eq. 5's relief (relieve) so far. */
  reliefLayers = 0;
  /** Steps so far, and the step at which Eq. 5's rule last moved each request's layers. */
  private steps = 0;
  private readonly movedAt = new WeakMap<Request, number>();

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
   * LayerKV for every prefill (`--layerwise-prefill`): grows `req`'s tables for the layer split
   * layerSplit chooses (runtime/layer_split.ts) and returns its distance (0: every layer on the
   * device), or null with nothing grown: no split fits beside the running requests' forecast
   * growth (Eq. 5), and the prefill waits. Kept layers get its whole admission KV (`full`
   * positions), offloaded ones its first chunk, grown as its prefill writes them. A swapped
   * request (its host copy comes back whole) and one resuming in place (its layout holds VACANT
   * entries, which offloading cannot have) are admitted only whole. `prefix`: the cached blocks
   * already shared into its tables, which its first chunk starts after.
   */
  growSplit(
    req: Request,
    prefix: readonly PrefixEntry[],
    full: number,
    running: readonly Request[],
    ctx: PolicyContext,
  ): number | null {
    const L = this.pool.numLayers, B = this.pool.blockSize;
    const cached = Math.min(prefix.length * B, req.prefillTarget - 1);
    // The first chunk: the most rows one step gives a prefill.
    const first = Math.min(full, cached + this.maxRows);
    const wholeOnly = req.swapped || req.dropped > 0;
    // One distance per count of offloaded layers, each spreading them evenly over the depth
    // (as §3.1.2 does, so each copy out has the layers after it to hide under).
    const distances = wholeOnly ? [0] : candidateDistances(L);
    // What its tables hold already (shared prefix blocks, or the newest blocks a request resuming
    // in place kept) is not asked for again.
    let have = Infinity;
    for (let l = 0; l < L; l++) {
      have = Math.min(have, this.pool.table(req.id, l).filter((b) => b >= 0).length);
    }
    const residentBlocks = Math.max(0, Math.ceil(full / B) - have);
    // While it prefills an offloaded layer holds the chunks whose copies out have not landed yet
    // (a few), and in the end whatever lies past the prefetch region (only that much of a layer
    // ever leaves the device).
    const inFlight = 3 * (Math.ceil(this.maxRows / B) + 1);
    const offloadedBlocks = Math.min(
      residentBlocks,
      Math.max(residentBlocks - this.offloader.regionBlocks, inFlight),
    );
    const free = this.pool.availablePerLayer * L;
    const rows = full - cached;
    const steps = prefillSteps(rows, running.filter((r) => r.state === "decoding").length, ctx);
    const outAll = ctx.copyMs("out", residentBlocks);
    const { kept, blocks } = layerSplit({
      numLayers: L,
      offloadChoices: distances.map((d) => offloadedCount(d, L)),
      residentBlocks,
      offloadedBlocks,
      freeBlocks: free,
      // With nothing running nothing will free blocks: waiting for copies to hide gains nothing.
      prefillMs: running.length === 0
        ? null
        : steps && steps.reduce((ms, s) => ms + s.count * s.ms, 0),
      offloadMs: (layers) => outAll === null ? null : (outAll * layers) / L,
    });
    // Refused: the running requests' kept layers make way (beforeStep's relief).
    if (kept === null) this.refusedBlocks = blocks;
    if (kept === null) return null;
    const d = distances.find((d) => offloadedCount(d, L) === L - kept)!;
    const tokens = Array.from({ length: L }, (_, l) => isOffloaded(d, l) ? first : full);
    // Arenas may be shorter than the layer-averaged count said: then it waits too.
    if (!this.pool.growEach(req.id, tokens)) {
      this.refusedBlocks = blocks;
      return null;
    }
    this.refusedBlocks = 0;
    this.prefillSplits++;
    this.splits.set(req, kept);
    return d;
  }

  /** The layers `req`'s last split kept on the device (undefined: it had none). */
  splitOf(req: Request): number | undefined {
    return this.splits.get(req);
  }

  /** Device blocks of `req`'s offloaded layers that leave the device once their copies land. */
  private leaving(req: Request): number {
    const d = this.offloader.distanceOf(req);
    if (d === 0) return 0;
    const extent = Math.min(
      Math.floor(req.computed / this.pool.blockSize),
      this.offloader.regionBlocks,
    );
    let n = 0;
    for (const l of offloadedLayers(d, this.pool.numLayers)) {
      n += this.pool.table(req.id, l).slice(0, extent).filter((b) => b >= 0).length;
    }
    return n;
  }

  /** A running request as the forecast sees it: what it holds and may still grow by. */
  private grower(req: Request): Grower {
    const B = this.pool.blockSize;
    let blocks = 0;
    for (let l = 0; l < this.pool.numLayers; l++) {
      blocks = Math.max(blocks, this.pool.table(req.id, l).length);
    }
    const end = req.promptLength + req.spec.maxTokens;
    return {
      held: this.pool.heldBy(req.id),
      positions: blocks * B,
      left: Math.max(0, end - blocks * B),
      // Offloaded layers grow on the device too until their copies land: count every layer.
      blocksPerBlock: this.pool.numLayers,
    };
  }

  /** `req` was just admitted layer-wise at `distance` (growSplit's). */
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
    const want = planner
      ? (req: Request) => planner.distanceOf(req)
      : this.options.distance ?? (this.splitsPrefills ? this.forecastDistances(running) : null);
    const L = this.pool.numLayers;
    for (const req of running) {
      // Without a planner, a uniform distance or layer-wise prefill every layer belongs on the
      // device (distance 0).
      let d = want ? want(req) : 0;
      const admitted = this.layerwise.get(req);
      if (admitted !== undefined) {
        // While it prefills, a layer-wise admission keeps at least as many layers offloaded as it
        // was admitted with (its blocks were counted so); a distance offloading more may replace
        // it. Once it decodes, the asked-for distance takes over (setDistance waits for room).
        // With layer-wise prefill alone that is the Eq. 5 rule's (forecastDistances).
        if (req.state !== "prefilling") this.layerwise.delete(req);
        else if (offloadedCount(d, L) < offloadedCount(admitted, L)) d = admitted;
      }
      if (this.offloader.distanceOf(req) !== d && !req.refill) this.setDistance(req, d);
    }
    this.offloader.beginStep(running);
  }

  /**
   * LayerKV's own placement of running requests (layer-wise prefill without a planner or uniform
   * distance), from the Eq. 5 forecast of their growth: each keeps the distance it has unless the
   * lowest forecast free blocks fall below the threshold (what the queue's head was last refused,
   * else 0), when the newest requests' kept layers go to the host, x/2 then x (relieve); or unless
   * it stays above the threshold by more than an older request's offloaded layers take, when they
   * come back (free prefetching while memory allows).
   */
  private forecastDistances(running: readonly Request[]): (req: Request) => number {
    const L = this.pool.numLayers, B = this.pool.blockSize;
    const threshold = this.refusedBlocks;
    this.refusedBlocks = 0;
    const now = (req: Request) => this.offloader.distanceOf(req);
    const chosen = new Map<Request, number>();
    // Offloaded layers' blocks whose copies out are under way are as good as free (else each step
    // until they land would offload more for the same shortfall).
    const leaving = new Map(running.map((r) => [r, this.leaving(r)]));
    const free = this.pool.availablePerLayer * L + [...leaving.values()].reduce((a, b) => a + b, 0);
    const growers = running.map((r) => ({
      ...this.grower(r),
      held: this.pool.heldBy(r.id) - leaving.get(r)!,
    }));
    // All their growth at once is a lower bound of the forecast: past the threshold, no need to
    // play it out stage by stage.
    const bound = free - growers.reduce((n, g) => n + Math.ceil(g.left / B) * g.blocksPerBlock, 0);
    const lowest = bound >= threshold ? bound : forecastLowest(free, growers, B, HORIZON);
    // A layer's blocks that go (or come back) with it: what lies within the prefetch region.
    const layerBlocks = (req: Request) =>
      Math.min(Math.floor(req.computed / B), this.offloader.regionBlocks);
    // A request whose layers this rule moved lately is left alone while its copies settle (moving
    // them back and forth would only spend the link).
    const step = ++this.steps;
    const movable = running.filter((r) =>
      !r.refill && r.dropped === 0 && r.slot >= 0 &&
      step - (this.movedAt.get(r) ?? -SETTLE) >= SETTLE
    );
    if (lowest < threshold) {
      // Decoding ones: a prefill's offloaded layers are copied out as it writes them, after each
      // layer, and only the layers it was admitted with.
      const newest = movable.filter((r) => r.state === "decoding")
        .sort((a, b) => b.admittedAt - a.admittedAt);
      const keepers = newest.map((r) => ({
        kept: L - offloadedCount(now(r), L),
        blocksPerLayer: layerBlocks(r),
      }));
      relieve(keepers, threshold - lowest).forEach((kept, i) => {
        if (kept >= keepers[i].kept) return;
        chosen.set(newest[i], keepingDistance(kept, L));
        this.movedAt.set(newest[i], step);
        this.reliefLayers += keepers[i].kept - kept;
      });
    } else {
      let spare = lowest - threshold;
      for (const r of [...movable].sort((a, b) => a.admittedAt - b.admittedAt)) {
        const offloaded = offloadedCount(now(r), L);
        const cost = offloaded * layerBlocks(r);
        if (offloaded === 0 || r.state === "prefilling" || cost > spare) continue;
        spare -= cost;
        chosen.set(r, 0);
        this.movedAt.set(r, step);
      }
    }
    return (req) => chosen.get(req) ?? now(req);
  }

  /** True when every prefill gets a layer split (growSplit): layer-wise prefill is on. */
  get splitsPrefills(): boolean {
    return this.options.layerwisePrefill === true;
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

  /**
   * After a step's rows: with layer-wise prefill, the offloaded layers' blocks the step's rows
   * filled are copied out within the step, after their layers (Offloader.copyWritten).
   */
  afterRows(inStep: Iterable<Request>): void {
    if (this.splitsPrefills) this.offloader.copyWritten(inStep);
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

/** The distance that keeps at most `kept` of `numLayers` layers on the device, keeping the most. */
function keepingDistance(kept: number, numLayers: number): number {
  return candidateDistances(numLayers).find((d) =>
    offloadedCount(d, numLayers) >= numLayers - kept
  )!;
}
