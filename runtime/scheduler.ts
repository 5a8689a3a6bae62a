// Continuous batching over a shared, on-demand KV pool. Each call to schedule() is one step:
//
//   1. reap:  free what finished or cancelled requests held;
//   2. admit: in arrival order (paused requests first), while a slot is free and the policy's
//             admission blocks are, sharing whatever leading blocks the prefix cache holds;
//   3. build: a decode row for every decoding request, then prefill chunks in admission order,
//             each given the blocks it needs first; when the pool is short the policy names a
//             request to preempt (its KV freed, requeued at the head, recomputed on resume).
//
// The scheduler is pure host logic: it returns a plan, and the engine runs it.

import type { BlockPool } from "./kv/block_pool.ts";
import type { PrefixIndex } from "./kv/prefix_index.ts";
import { NOT_RESIDENT } from "../engine/kv/pool_shape.ts";
import type { SampleRecord, SamplingParams, StepPlan, TableWrite } from "../engine/engine.ts";
import type { Request } from "./request.ts";
import type { PrefixEntry } from "./kv/prefix_index.ts";
import type { PolicyContext, SchedulingPolicy } from "./policy/policy.ts";
import type { CostModel } from "../engine/engine.ts";
import { copyMs as copyCost, predictStepMs } from "../engine/kv/cost_model.ts";
import type { HostTier, Landing } from "./kv/host_tier.ts";
import type { Swapper } from "./kv/swap.ts";
import type { Offloader } from "./kv/offload.ts";
import { choosePreemption, type PreemptKind } from "./preempt_choice.ts";
import { candidateDistances, isOffloaded, offloadedCount } from "./plan/offload_pattern.ts";

export interface SchedulerOptions {
  /**
   * What preemption does with a request's KV: free it all and recompute it on resume; swap it to
   * the host tier (when it has room); or free only as many of its oldest blocks as are needed and
   * recompute just those on resume (eLLM).
   */
  preempt: "recompute" | "swap" | "partial";
  /**
   * "auto": `preempt` is not consulted; each victim's KV is swapped, partly dropped or all
   * dropped, whichever the cost model predicts cheapest (runtime/preempt_choice.ts). Needs
   * `costModel` and `kvBlockBytes`. Default "off".
   */
  recompute?: "off" | "auto";
  /** Full blocks (per layer) mirrored to the host per request per step; 0 = no write-through. */
  writeThroughBlocks: number;
  /**
   * The offload distance each running request should have (0: all layers on the device). Needs
   * an offloader. Uniform: the same for all; a planner may pick per request.
   */
  offloadDistance?: (req: Request) => number;
  /**
   * A planner choosing distances for the whole batch (OrbitFlow): told the running requests before
   * each step (it may start a re-plan, never waits for one), then asked each request's distance.
   * Takes precedence over offloadDistance.
   */
  offloadPlanner?: OffloadPlanner;
  /** The runtime's clock (ms), for policies that read token buffers. Default performance.now. */
  now?: () => number;
  /** The engine's cost model as last re-fitted, for policies that predict step times. */
  costModel?: () => CostModel | undefined;
  /** Bytes of one KV block (one layer), for predicted copy times. */
  kvBlockBytes?: number;
  /**
   * LayerKV's layer-wise prefill (`--sched slo`; needs an offloader): a waiting request whose full
   * admission KV does not fit on the device is admitted at an offload distance, the largest one
   * (fewest layers on the host) whose resident layers fit in full and whose offloaded layers fit
   * their first prefill chunk. Its offloaded layers then grow chunk by chunk as the prefill writes
   * them and leave the device as their copies to the host land, so its peak device footprint
   * stays well below its full KV. It keeps at least that many layers offloaded until it has
   * prefilled; then the planner's or uniform distance (or, with neither, 0 once the device has
   * room) takes over. Default false: admission waits until the full KV fits.
   */
  layerwisePrefill?: boolean;
}

export interface OffloadPlanner {
  beforeStep(running: readonly Request[]): void;
  distanceOf(req: Request): number;
  /**
   * Running requests no feasible plan could keep (OrbitFlow pauses them and evicts their layers);
   * called after beforeStep. Optional.
   */
  toPause?(running: readonly Request[]): Request[];
  /** False while the last plan needed a pause: admissions wait until a feasible plan exists. */
  feasible?(): boolean;
}

export interface SchedulerLimits {
  maxSlots: number;
  /** Most token rows per step; bounds how long one prefill chunk can stall the running decodes. */
  maxRows: number;
  /** Block-table entries per (slot, layer). */
  maxBlocksPerSeq: number;
}

/** A built step: the plan for the engine and, per sample row, the request it belongs to. */
export interface BuiltStep {
  plan: StepPlan;
  owners: Request[];
  /** Host copies that are complete once this step is delivered. */
  landings: Landing[];
}

/** The host tier and the swaps over it. */
export interface HostSide {
  tier: HostTier;
  swaps: Swapper;
}

export class Scheduler {
  /** Requests waiting for a slot: arrival order, with preempted ones put back at the head. */
  readonly waiting: Request[] = [];
  /** Admitted requests, oldest admission first. */
  readonly running: Request[] = [];
  preemptions = 0;
  /** Resumes that kept the newest KV and computed only the dropped oldest positions again. */
  partialResumes = 0;
  /** Preemptions by what became of the victim's KV; they add up to `preemptions`. */
  readonly preemptChoices: Record<PreemptKind, number> = { swap: 0, dropOldest: 0, dropAll: 0 };
  /** Prefill rows of positions their request had computed before (its KV was lost meanwhile). */
  recomputedTokens = 0;
  /** Running requests paused by the policy or the planner (not for want of a block). */
  policyPauses = 0;
  /** Decode rows the policy held back (their readers had enough buffered). */
  heldRows = 0;
  /** Requests held back in the last step built: the loop must look again soon, unasked. */
  holding = 0;
  /** Requests admitted by layer-wise prefill (some layers offloaded) because their KV did not fit. */
  layerwiseAdmissions = 0;
  /** What policies read: the clock, free room, the cost model's predictions. */
  readonly context: PolicyContext;
  private readonly freeSlots: number[];
  private admissions = 0;
  /** Host-side updates the next step must carry to the engine. */
  private tables: TableWrite[] = [];
  private sampling: { slot: number; params: SamplingParams }[] = [];
  /** Layer-wise admissions still prefilling, with the distance they were admitted at. */
  private readonly layerwise = new Map<Request, number>();

  constructor(
    private readonly pool: BlockPool,
    private readonly limits: SchedulerLimits,
    private readonly policy: SchedulingPolicy,
    private readonly prefixIndex: PrefixIndex | null = null,
    private readonly host: HostSide | null = null,
    private readonly options: SchedulerOptions = { preempt: "recompute", writeThroughBlocks: 0 },
    private readonly offloader: Offloader | null = null,
  ) {
    this.freeSlots = Array.from({ length: limits.maxSlots }, (_, i) => limits.maxSlots - 1 - i);
    this.context = this.makeContext();
  }

  private makeContext(): PolicyContext {
    // deno-lint-ignore no-this-alias
    const self = this;
    const { pool, limits, options } = this;
    const now = options.now ?? (() => performance.now());
    return {
      now,
      maxSlots: limits.maxSlots,
      get freeSlots() {
        return self.freeSlots.length;
      },
      maxRows: limits.maxRows,
      blockSize: pool.blockSize,
      blocksPerLayer: pool.blocksPerLayer,
      get freeBlocksPerLayer() {
        return pool.availablePerLayer;
      },
      hostTier: this.host !== null,
      stepMs(rows: number, samples: number) {
        const m = options.costModel?.();
        return m ? predictStepMs(m, { rows, samples }) : null;
      },
      copyMs(direction: "in" | "out", blocksPerLayer: number) {
        const m = options.costModel?.();
        if (!m || !options.kvBlockBytes) return null;
        const bytes = blocksPerLayer * pool.numLayers * options.kvBlockBytes;
        // One block group per layer, K and V.
        const copies = 2 * pool.numLayers;
        return copyCost(
          m,
          direction === "in"
            ? { rows: 0, bytesIn: bytes, copiesIn: copies }
            : { rows: 0, bytesOut: bytes, copiesOut: copies },
        );
      },
    };
  }

  enqueue(req: Request): void {
    this.waiting.push(req);
  }

  get hasWork(): boolean {
    return this.waiting.length > 0 || this.running.length > 0;
  }

  /** Requests that have never run, or were preempted, and wait for admission. */
  get queued(): number {
    return this.waiting.length;
  }

  /** One step's plan, or null when nothing can run now. */
  schedule(): BuiltStep | null {
    this.reap();
    this.pauseByPolicy();
    this.admit();
    const step = this.build();
    if (step || this.running.length > 0 || this.waiting.length === 0) return step;
    // Building preempted the last running request: admit again, now that nothing runs (paused
    // requests may give up the KV they kept), or nothing would ever wake the loop.
    this.admit();
    return this.build();
  }

  /** Frees everything held by finished or cancelled requests. Called at step boundaries only. */
  reap(): void {
    for (const req of this.waiting.filter((r) => r.cancelled || r.finish)) {
      req.end("cancelled");
      this.host?.tier.release(req);
      this.pool.release(req.id); // a request paused holding its newest blocks
      this.waiting.splice(this.waiting.indexOf(req), 1);
    }
    for (const req of this.running.filter((r) => r.cancelled || r.finish)) {
      req.end("cancelled");
      this.leaveBatch(req);
    }
  }

  /**
   * Pauses the running requests the policy (buffer-aware preemption) or the offload planner (no
   * feasible plan) names; they keep their streams and wait at the head of the queue.
   */
  private pauseByPolicy(): void {
    const named = new Set([
      ...this.policy.pauseBeforeStep?.(this.running, this.waiting, this.context) ?? [],
      ...this.options.offloadPlanner?.toPause?.(this.running) ?? [],
    ]);
    for (const req of named) {
      if (!this.running.includes(req) || req.finish || req.refill) continue;
      this.preempt(req);
      this.policyPauses++;
    }
  }

  /**
   * Admits waiting requests while a slot and the policy's blocks are free, in the policy's order
   * (default: queue order). A request that does not fit ends admission for this step.
   */
  admit(): void {
    if (this.options.offloadPlanner?.feasible?.() === false) return;
    const ordered = this.policy.order;
    const queue = ordered ? ordered.call(this.policy, this.waiting, this.context) : this.waiting;
    for (const req of [...queue]) {
      if (this.freeSlots.length === 0) break;
      // Not ready (Request.resumable): queue order waits for it; a policy's order goes on.
      if (!req.resumable) {
        if (ordered) continue;
        break;
      }
      if (this.policy.mayAdmit && !this.policy.mayAdmit(req, this.running, this.context)) break;
      if (!this.tryAdmit(req)) break; // no overtaking: a large request is not passed over for ever
    }
  }

  /** Admits `req` into a free slot if the policy's admission blocks are free; false if not. */
  private tryAdmit(req: Request): boolean {
    const resumesInPlace = req.dropped > 0; // it kept its newest blocks: refill the oldest
    let prefix: PrefixEntry[];
    let distance = 0; // > 0: admitted layer-wise at this offload distance
    while (true) {
      prefix = req.swapped || resumesInPlace ? [] : this.sharePrefix(req);
      if (this.pool.growAll(req.id, this.policy.admissionTokens(req))) break;
      // Nothing runs, so nothing will free blocks: paused requests holding some give them up.
      const drop = this.running.length === 0 ? this.heldKvToDrop(req) : null;
      // Layer-wise only when that would not help: admitted alone beside KV that others hold, it
      // could never grow past its first chunks (it would preempt itself and come back for ever).
      if (!drop) distance = this.growLayerwise(req, prefix);
      if (distance > 0) break;
      if (!resumesInPlace) this.pool.release(req.id);
      if (!drop) return false;
      this.pool.release(drop.id);
      drop.forgetKv();
    }
    this.waiting.splice(this.waiting.indexOf(req), 1);
    if (resumesInPlace) {
      req.resumeInPlace(this.freeSlots.pop()!, this.admissions++);
      this.partialResumes++;
      this.enterBatch(req);
      return true;
    }
    // At least the last position is computed again: its logits pick the next token.
    let cached = Math.min(prefix.length * this.pool.blockSize, req.prefillTarget - 1);
    if (req.swapped) {
      cached = Math.min(req.hostTokens, req.prefillTarget - 1);
      this.host!.swaps.swapIn(req, cached);
      req.swapped = false;
    }
    req.admit(this.freeSlots.pop()!, this.admissions++, prefix, cached);
    if (distance > 0) {
      // Nothing is offloaded yet, so this only records the distance: it cannot fail.
      if (!this.offloader!.setDistance(req, distance)) {
        throw new Error(`request ${req.id}: layer-wise admission at distance ${distance} refused`);
      }
      this.layerwise.set(req, distance);
      this.layerwiseAdmissions++;
    }
    this.enterBatch(req);
    return true;
  }

  /**
   * Layer-wise admission: grows `req`'s tables so that the layers distance d keeps on the device
   * hold its whole admission KV and the layers it offloads hold the first prefill chunk, for the
   * largest d (fewest layers on the host) whose blocks are free now. Returns d, or 0 (nothing
   * grown) when layer-wise prefill is off, does not apply, or no distance fits. A swapped request
   * (its host copy comes back whole) and one resuming in place (its layout holds DROPPED entries,
   * which offloading cannot have) are admitted only whole. `prefix`: the cached blocks already
   * shared into its tables, which its first chunk starts after.
   */
  private growLayerwise(req: Request, prefix: readonly PrefixEntry[]): number {
    if (!this.options.layerwisePrefill || !this.offloader || req.swapped || req.dropped > 0) {
      return 0;
    }
    const L = this.pool.numLayers;
    const full = this.policy.admissionTokens(req);
    const cached = Math.min(prefix.length * this.pool.blockSize, req.prefillTarget - 1);
    // The first chunk: the most rows one step gives a prefill (build() may give it fewer, then
    // ensureBlocks grows its offloaded layers for the rest as it goes).
    const first = Math.min(full, cached + this.limits.maxRows);
    if (first >= full) return 0; // one chunk is the whole prompt: offloading saves nothing
    // candidateDistances: 0, then ever more layers offloaded (the widest stride for each count).
    for (const d of candidateDistances(L).filter((d) => d > 0)) {
      const tokens = Array.from({ length: L }, (_, l) => isOffloaded(d, l) ? first : full);
      if (this.pool.growEach(req.id, tokens)) return d;
    }
    return 0;
  }

  /** Uploads the admitted request's tables and sampling parameters for its new slot. */
  private enterBatch(req: Request): void {
    for (let layer = 0; layer < this.pool.numLayers; layer++) {
      this.tables.push(this.fullRow(req.slot, layer, this.pool.table(req.id, layer)));
    }
    this.sampling.push({ slot: req.slot, params: req.spec.sampling });
    this.running.push(req);
  }

  /**
   * The newest paused request other than `head` still holding KV: freeing it (it will recompute
   * it all) may let `head` be admitted. Null when there is none.
   */
  private heldKvToDrop(head: Request): Request | null {
    for (const req of [...this.waiting].reverse()) {
      if (req === head || this.pool.heldBy(req.id) === 0 || req.swapped) continue;
      return req;
    }
    return null;
  }

  /** Delivers a step's sampled tokens to their requests (none after a finish), and its landings. */
  deliver(step: Pick<BuiltStep, "owners" | "landings">, records: SampleRecord[]): void {
    this.host?.tier.land(step.landings);
    records.forEach((rec, i) => step.owners[i].accept(rec));
  }

  failAll(message: string): void {
    for (const req of [...this.waiting, ...this.running]) req.end("error", message);
    this.reap();
  }

  private build(): BuiltStep | null {
    if (this.offloader) this.placeLayers();
    if (this.host && this.options.writeThroughBlocks > 0) {
      // Before this step's rows: only blocks written by earlier steps are complete.
      for (const req of this.running) {
        // A request still recomputing its oldest blocks has none of them to copy yet.
        if (!req.refill) this.host.swaps.writeThrough(req, this.options.writeThroughBlocks);
      }
    }
    const rows: StepPlan["rows"] = [];
    const samples: StepPlan["samples"] = [];
    const owners: Request[] = [];
    const inStep = new Set<Request>();
    const push = (req: Request, row: StepPlan["rows"][number]) => {
      if (row.pos < req.computedHigh) this.recomputedTokens++;
      req.computedHigh = Math.max(req.computedHigh, row.pos + 1);
      rows.push(row);
    };
    const sample = (req: Request) => {
      samples.push({ row: rows.length - 1 });
      owners.push(req);
      req.issued++;
    };

    const held = this.policy.holdBack?.(this.running, this.context);
    this.holding = held?.size ?? 0;
    for (const req of [...this.running]) {
      if (req.state !== "decoding" || req.issued >= req.spec.maxTokens) continue;
      if (held?.has(req)) {
        this.heldRows++;
        continue;
      }
      const pos = req.promptLength + req.issued - 1; // the newest sampled id goes in here
      if (!this.ensureBlocks(req, pos + 1, inStep)) continue;
      if (this.offloader && !this.offloader.claimRegion(req)) continue;
      push(req, { slot: req.slot, pos, token: null });
      inStep.add(req);
      req.computed = pos + 1;
      this.cacheFullBlocks(req);
      sample(req);
    }
    for (const req of [...this.running]) {
      if (rows.length >= this.limits.maxRows) break;
      if (req.state !== "prefilling") continue;
      if (req.refill) {
        // The oldest positions, dropped while it was paused, are computed again first.
        const r = req.refill;
        const m = Math.min(r.end - r.next, this.limits.maxRows - rows.length);
        for (let pos = r.next; pos < r.next + m; pos++) {
          push(req, { slot: req.slot, pos, token: req.tokenAt(pos) });
        }
        inStep.add(req);
        r.next += m;
        if (r.next < r.end) continue;
        req.refill = null;
      }
      const n = Math.min(req.prefillTarget - req.computed, this.limits.maxRows - rows.length);
      if (!this.ensureBlocks(req, req.computed + n, inStep)) continue;
      if (this.offloader && !this.offloader.claimRegion(req)) continue;
      for (let pos = req.computed; pos < req.computed + n; pos++) {
        push(req, { slot: req.slot, pos, token: req.tokenAt(pos) });
      }
      inStep.add(req);
      req.computed += n;
      this.cacheFullBlocks(req);
      if (req.computed < req.prefillTarget) continue;
      req.state = "decoding";
      if (req.spec.maxTokens === 0) req.end("length"); // nothing to sample: done once prefilled
      else sample(req);
    }
    const { copies, landings } = this.host?.tier.take() ?? { copies: [], landings: [] };
    const offload = this.offloader?.take() ?? { prefetch: [], tables: [] };
    if (rows.length === 0 && copies.length === 0 && landings.length === 0) return null;
    const plan: StepPlan = {
      copies,
      prefetch: offload.prefetch,
      // Prefetch region entries last: they override what a slot's new table said for those.
      tables: [...this.tables, ...offload.tables],
      sampling: this.sampling,
      rows,
      samples,
      wantTopLogprobs: owners.some((r) => r.spec.topLogprobs > 0),
    };
    this.tables = [];
    this.sampling = [];
    return { plan, owners, landings };
  }

  /**
   * Gives running requests the offload distance the options ask for (a refilling request waits),
   * then frees landed offloaded blocks and copies newly full ones out, before this step's rows.
   */
  private placeLayers(): void {
    const offloader = this.offloader!;
    const planner = this.options.offloadPlanner;
    planner?.beforeStep(this.running);
    const want = planner ? (req: Request) => planner.distanceOf(req) : this.options.offloadDistance;
    const L = this.pool.numLayers;
    for (const req of this.running) {
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
      if (offloader.distanceOf(req) !== d && !req.refill) offloader.setDistance(req, d);
    }
    offloader.beginStep(this.running);
  }

  /**
   * Gives `req` blocks for `tokens` positions on every layer, preempting the policy's victims
   * while the pool is short. False when `req` itself was preempted.
   */
  private ensureBlocks(req: Request, tokens: number, inStep: Set<Request>): boolean {
    while (!this.pool.canGrowAll(req.id, tokens)) {
      // Requests already in this step keep their rows; only the rest may be preempted.
      const candidates = this.running.filter((r) => r === req || !inStep.has(r));
      const victim = this.policy.pickVictim(candidates, req);
      const drop = victim === req ? 0 : this.oldestToDrop(victim, req, tokens);
      const how = this.howToPreempt(victim, drop);
      if (how.kind === "dropOldest") {
        this.dropOldest(victim, how.blocks);
        continue;
      }
      this.preempt(victim, how.kind === "swap");
      if (victim === req) return false;
    }
    const added = this.pool.growAll(req.id, tokens);
    if (!added) throw new Error(`block pool refused request ${req.id} an allocation it said fits`);
    added.forEach((blocks, layer) => {
      if (blocks.length === 0) return;
      const first = this.pool.table(req.id, layer).length - blocks.length;
      this.tables.push({ slot: req.slot, layer, first, blocks });
    });
    return true;
  }

  /**
   * Shares the cached blocks that cover `req`'s leading tokens (all but the last: its logits must
   * be computed) into its tables; returns their prefix entries. Those found only in the host tier
   * come back into fresh blocks, copied in before the next step's kernels run (so `req` may
   * prefill its tail in that step).
   */
  private sharePrefix(req: Request): PrefixEntry[] {
    if (!this.prefixIndex) return [];
    const target = req.prefillTarget;
    const most = Math.floor((target - 1) / this.pool.blockSize);
    return this.prefixIndex.acquire(req.id, req.tokens(0, target), most);
  }

  /** Offers every full block whose tokens are known and whose KV is written to the prefix cache. */
  private cacheFullBlocks(req: Request): void {
    if (!this.prefixIndex) return;
    const B = this.pool.blockSize;
    const known = Math.min(req.computed, req.promptLength + req.generated.length);
    for (let i = req.prefix.length; !req.prefixDiverged && (i + 1) * B <= known; i++) {
      const blocks = Array.from(
        { length: this.pool.numLayers },
        (_, layer) => this.pool.table(req.id, layer)[i],
      );
      const parent = req.prefix[i - 1] ?? null;
      const entry = this.prefixIndex.insert(parent, req.tokens(i * B, (i + 1) * B), blocks);
      // Another request cached these tokens first, in its own blocks. Chaining ours after its
      // entry would let a cached block we hold hang under an entry nobody holds, which the index
      // could then never evict; so this request caches no further blocks.
      if (entry.blocks!.some((b, layer) => b !== blocks[layer])) req.prefixDiverged = true;
      else req.prefix.push(entry);
    }
  }

  /**
   * What becomes of `victim`'s KV: with `recompute: "auto"`, the option the cost model predicts
   * cheapest (runtime/preempt_choice.ts); else what `preempt` says. `dropBlocks`: the fewest
   * oldest blocks whose drop makes the room asked for (0: a partial drop is not possible).
   */
  private howToPreempt(victim: Request, dropBlocks: number): { kind: PreemptKind; blocks: number } {
    const fixed = this.options.preempt;
    const ctx = this.context;
    const B = this.pool.blockSize;
    if (this.options.recompute !== "auto" || ctx.stepMs(1, 0) === null) {
      if (fixed === "partial" && dropBlocks > 0) return { kind: "dropOldest", blocks: dropBlocks };
      return { kind: fixed === "swap" ? "swap" : "dropAll", blocks: 0 };
    }
    // A request still computing its dropped oldest positions has no whole KV to copy out.
    const canSwap = this.host !== null && !victim.refill && victim.computed > 0 &&
      ctx.copyMs("out", 1) !== null && this.host.tier.pool.canGrowAll(victim.id, victim.computed);
    return choosePreemption({
      computed: victim.computed,
      target: victim.prefillTarget,
      hostBlocks: Math.floor(victim.hostIssued / B),
      canSwap,
      dropBlocks,
      slackMs: victim.buffer.occupancy().seconds * 1000 + (victim.spec.slo.tbtMs ?? 0),
    }, {
      blockSize: B,
      maxRows: this.limits.maxRows,
      stepMs: (rows) => ctx.stepMs(rows, 0)!,
      copyMs: (direction, blocks) => ctx.copyMs(direction, blocks)!,
    });
  }

  /**
   * eLLM: how many of `victim`'s oldest blocks (per layer) must go for `needy` to grow to
   * `tokens`; 0 when that would drop all its blocks, or it is still refilling or offloads layers:
   * then it can only be preempted whole.
   */
  private oldestToDrop(victim: Request, needy: Request, tokens: number): number {
    if (victim.refill || victim.computed === 0 || this.offloader?.offloads(victim)) return 0;
    const k = this.pool.missingPerLayer(needy.id, tokens);
    // Keep at least its newest block, else this is a plain preemption.
    return k < 1 || (k + 1) * this.pool.blockSize > victim.computed ? 0 : k;
  }

  /**
   * Frees `victim`'s `k` oldest blocks and pauses it holding the rest; on resume only the dropped
   * positions are computed again.
   */
  private dropOldest(victim: Request, k: number): void {
    this.host?.tier.release(victim); // its host copy no longer matches what it will hold
    this.pool.dropLeading(victim.id, k);
    this.freeSlots.push(victim.slot);
    this.running.splice(this.running.indexOf(victim), 1);
    victim.pauseKeepingNewest(k * this.pool.blockSize);
    this.waiting.unshift(victim);
    this.preemptions++;
    this.preemptChoices.dropOldest++;
  }

  /**
   * Frees `req`'s KV and slot and puts it back at the head of the queue; its stream stays open.
   * `swap`: its KV goes to the host tier, if that has room.
   */
  private preempt(req: Request, swap = this.howToPreempt(req, 0).kind === "swap"): void {
    const swapped = swap && (this.host?.swaps.swapOut(req) ?? false);
    if (!swapped) this.host?.tier.release(req); // recomputed from its ids: drop any partial host copy
    this.offloader?.forget(req, swapped);
    this.layerwise.delete(req);
    this.leaveBatch(req);
    req.pause();
    req.swapped = swapped;
    this.waiting.unshift(req);
    this.preemptions++;
    this.preemptChoices[swapped ? "swap" : "dropAll"]++;
  }

  private leaveBatch(req: Request): void {
    this.layerwise.delete(req);
    if (req.finish) {
      this.offloader?.forget(req, false);
      this.host?.tier.release(req);
    }
    this.pool.release(req.id);
    this.freeSlots.push(req.slot);
    this.running.splice(this.running.indexOf(req), 1);
  }

  private fullRow(slot: number, layer: number, blocks: number[]): TableWrite {
    const row = new Array(this.limits.maxBlocksPerSeq).fill(NOT_RESIDENT);
    // DROPPED and OFFLOADED entries hold no device block.
    blocks.forEach((b, i) => row[i] = b < 0 ? NOT_RESIDENT : b);
    return { slot, layer, first: 0, blocks: row };
  }
}
