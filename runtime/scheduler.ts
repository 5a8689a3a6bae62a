// Continuous batching over a shared, on-demand KV pool. Each call to schedule() is one step:
//
//   1. reap:    free what finished or cancelled requests held;
//   2. pause:   requests the policy (buffer-aware preemption) or the offload planner names leave
//               the batch, their streams playing on from their buffers;
//      (with --token-cache, eLLM's rule then says how much of each running request's oldest KV
//      stays uncached: token_cached.ts; its decode rows come after rows that recompute it)
//   3. admit:   in the policy's order (default: the queue's, paused requests first), while a slot
//               is free and the policy's admission blocks are, sharing what the prefix cache holds;
//   4. build:   a decode row for every decoding request, then prefill chunks in admission order,
//               each given the blocks it needs first; when the pool is short the policy names a
//               request to preempt (preemption.ts). A constrained request (grammar/) samples only
//               once its last token is back and its mask computed, so it is never pipelined; its
//               rows carry their tokens, forced ones (jump-forward) included;
//      When nothing in it needs the host between steps (decode rows only, no grammar, nobody
//      waiting or held back, no copies), the step becomes a decode group: k steps of the same rows
//      in one submission (decode_group.ts), k bounded so a group's time stays short;
//   5. deliver: once the engine has run the step, its sampled tokens go to their requests.
//
// The scheduler is pure host logic: it returns a plan (step_builder.ts), and the engine runs it.
// Its collaborators each hold one idea: the queue and slots (batch.ts), preemption, where layers
// live (placement.ts), the prefix cache (prefix_cache.ts) and the host tier (kv/).

import type { CostModel, SampleRecord } from "../engine/engine.ts";
import { Batch } from "./batch.ts";
import type { BlockPool } from "./kv/block_pool.ts";
import type { HostTier } from "./kv/host_tier.ts";
import type { PrefixEntry } from "./kv/prefix_index.ts";
import type { Swapper } from "./kv/swap.ts";
import type { Placement } from "./placement.ts";
import { SlidingWindow } from "./sliding_window.ts";
import { RemovableCache, type RemovableStats } from "./kv/removable.ts";
import { policyContext } from "./policy/context.ts";
import type { PolicyContext, SchedulingPolicy } from "./policy/policy.ts";
import { type PreemptRule, RECOMPUTE } from "./policy/preset.ts";
import type { PreemptKind } from "./preempt_choice.ts";
import { Preemption } from "./preemption.ts";
import type { PrefixCache } from "./prefix_cache.ts";
import type { Request } from "./request/request.ts";
import { type BuiltStep, StepBuilder } from "./step_builder.ts";
import { TokenCached } from "./token_cached.ts";
import { type DecodeSteps, groupSize, NO_GROUPS } from "./decode_group.ts";

export interface SchedulerLimits {
  maxSlots: number;
  /** Most token rows per step; bounds how long one prefill chunk can stall the running decodes. */
  maxRows: number;
  /** Block-table entries per (slot, layer). */
  maxBlocksPerSeq: number;
}

/** The host tier, the swaps over it, and how much each running request writes through a step. */
export interface HostParts {
  tier: HostTier;
  swaps: Swapper;
  /** Full blocks (per layer) mirrored to the host per request per step; 0 = no write-through. */
  writeThroughBlocks?: number;
}

/** What a scheduler is made of; only the pool, the limits and the policy are required. */
export interface SchedulerParts {
  pool: BlockPool;
  limits: SchedulerLimits;
  policy: SchedulingPolicy;
  /** What preemption does with a victim's KV (default: recompute it). */
  preempt?: PreemptRule;
  prefixCache?: PrefixCache | null;
  host?: HostParts | null;
  /** Offloaded layers and layer-wise admission (needs `host`). */
  placement?: Placement | null;
  /** The runtime's clock (ms), for policies that read token buffers. Default performance.now. */
  now?: () => number;
  /** The engine's cost model as last re-fitted, for policies that predict step times. */
  costModel?: () => CostModel | undefined;
  /** Bytes of one KV block (one layer), for predicted copy times. */
  kvBlockBytes?: number;
  /** eLLM's token-wise caching of running requests (token_cache.ts). Default false. */
  tokenCache?: boolean;
  /** The model's sliding window (Mistral): blocks behind it are freed (sliding_window.ts). */
  slidingWindow?: number | null;
  /** Multi-step decode: most steps per group and the time a group may take (default: none). */
  decodeSteps?: DecodeSteps;
}

export class Scheduler {
  /** Resumes that kept the newest KV and computed only the dropped oldest positions again. */
  partialResumes = 0;
  /** Prefill rows of positions their request had computed before (its KV was lost meanwhile). */
  recomputedTokens = 0;
  /** Running requests paused by the policy or the planner (not for want of a block). */
  policyPauses = 0;
  /** Decode rows the policy held back (their readers had enough buffered). */
  heldRows = 0;
  /** Requests held back in the last step built: the loop must look again soon, unasked. */
  holding = 0;
  /** Steps built as decode groups, and the decode steps they held. */
  groups = 0;
  groupedSteps = 0;
  /** What policies read: the clock, free room, the cost model's predictions. */
  readonly context: PolicyContext;
  private readonly batch: Batch;
  private readonly pool: BlockPool;
  private readonly policy: SchedulingPolicy;
  private readonly prefix: PrefixCache | null;
  private readonly host: HostParts | null;
  private readonly placement: Placement | null;
  private readonly preemption: Preemption;
  private readonly step: StepBuilder;
  /** eLLM: running requests holding only their newest KV (null: `--token-cache off`). */
  readonly tokenCached: TokenCached | null;
  /** Frees blocks behind a sliding window (null: no window, or a tier that needs whole tables). */
  readonly window: SlidingWindow | null;
  private readonly decodeSteps: DecodeSteps;
  /** The last measured time of one decode step (ms), for groups when no cost model predicts. */
  private measuredStepMs: number | null = null;
  /** `decisions` when this step began. */
  private decisionsBefore = 0;

  constructor(parts: SchedulerParts) {
    const { pool, limits, policy } = parts;
    this.pool = pool;
    this.policy = policy;
    this.prefix = parts.prefixCache ?? null;
    this.host = parts.host ?? null;
    this.placement = parts.placement ?? null;
    this.batch = new Batch(limits.maxSlots);
    this.decodeSteps = parts.decodeSteps ?? NO_GROUPS;
    this.step = new StepBuilder(pool, limits);
    this.context = policyContext({
      now: parts.now ?? (() => performance.now()),
      maxSlots: limits.maxSlots,
      freeSlots: () => this.batch.freeSlots,
      maxRows: limits.maxRows,
      pool,
      hostTier: this.host !== null,
      costModel: parts.costModel ?? (() => undefined),
      kvBlockBytes: parts.kvBlockBytes ?? 0,
    });
    this.tokenCached = parts.tokenCache
      ? new TokenCached({
        pool,
        maxRows: limits.maxRows,
        stepMs: (rows) => this.context.stepMs(rows, 0),
        admissionTokens: (req) => policy.admissionTokens(req),
        retable: (req) => this.step.retable(req),
        host: this.host?.tier ?? null,
        placement: this.placement,
        prefix: this.prefix,
      })
      : null;
    // The host tier, offloading and token-wise caching work on whole tables by position.
    const wholeTables = this.host !== null || this.placement !== null || this.tokenCached !== null;
    this.window = parts.slidingWindow && !wholeTables
      ? new SlidingWindow(pool, parts.slidingWindow)
      : null;
    this.preemption = new Preemption({
      batch: this.batch,
      pool,
      policy,
      rule: parts.preempt ?? RECOMPUTE,
      context: this.context,
      maxRows: limits.maxRows,
      host: this.host,
      placement: this.placement,
      prefix: this.prefix,
      tokenCached: this.tokenCached,
      // OrbitFlow's lazy pause: the planner's victims keep their KV until room is claimed.
      removable: this.placement && this.host ? new RemovableCache(pool, this.host.tier) : null,
    });
  }

  // ---- the queues ----

  /** Requests waiting for a slot: arrival order, with preempted ones put back at the head. */
  get waiting(): readonly Request[] {
    return this.batch.waiting;
  }

  /** Admitted requests, oldest admission first. */
  get running(): readonly Request[] {
    return this.batch.running;
  }

  /** OrbitFlow's lazy pauses: what paused requests kept and gave up (null without them). */
  get removable(): RemovableStats | null {
    return this.preemption.removable;
  }

  get hasWork(): boolean {
    return this.waiting.length > 0 || this.running.length > 0;
  }

  /** Requests that have never run, or were preempted, and wait for admission. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Queues a new request without admitting anything (the next step will). */
  enqueue(req: Request): void {
    this.batch.enqueue(req);
  }

  /** Queues a new request and admits what can be admitted now: whether it was. */
  submit(req: Request): "admitted" | "queued" {
    this.batch.enqueue(req);
    this.admit();
    return req.state === "waiting" ? "queued" : "admitted";
  }

  /** Takes a request that is still queued back out (the runtime refused it). */
  withdraw(req: Request): void {
    this.batch.withdraw(req);
  }

  // ---- counters kept by the collaborators ----

  get preemptions(): number {
    return this.preemption.count;
  }

  /** Preemptions by what became of the victim's KV; they add up to `preemptions`. */
  get preemptChoices(): Readonly<Record<PreemptKind, number>> {
    return this.preemption.choices;
  }

  /** Requests admitted by layer-wise prefill with some layers offloaded. */
  get layerwiseAdmissions(): number {
    return this.placement?.layerwiseAdmissions ?? 0;
  }

  /** Admissions given a layer split by layer-wise prefill, whole ones included. */
  get prefillSplits(): number {
    return this.placement?.prefillSplits ?? 0;
  }

  // ---- the step ----

  /** One step's plan, or null when nothing can run now. */
  schedule(): BuiltStep | null {
    this.decisionsBefore = this.decisions;
    this.reap();
    this.pauseByPolicy();
    this.tokenCached?.adjust(this.running, this.waiting, this.batch.freeSlots);
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
      this.batch.withdraw(req);
    }
    for (const req of this.running.filter((r) => r.cancelled || r.finish)) {
      req.end("cancelled");
      this.placement?.forget(req, false);
      this.tokenCached?.forget(req);
      this.host?.tier.release(req);
      this.pool.release(req.id);
      this.batch.leave(req);
    }
  }

  /**
   * Pauses the running requests the policy (buffer-aware preemption) or the offload planner (no
   * feasible plan) names; they keep their streams and wait at the head of the queue.
   */
  private pauseByPolicy(): void {
    const planned = new Set(this.placement?.toPause(this.running) ?? []);
    const named = new Set([
      ...this.policy.pauseBeforeStep?.(this.running, this.waiting, this.context) ?? [],
      ...planned,
    ]);
    for (const req of named) {
      if (!this.running.includes(req) || req.finish || req.refill) continue;
      this.preemption.pause(req, planned.has(req));
      this.policyPauses++;
    }
  }

  /**
   * Admits waiting requests while a slot and the policy's blocks are free, in the policy's order
   * (default: queue order). A request that does not fit ends admission for this step.
   */
  admit(): void {
    if (this.placement && !this.placement.feasible) return;
    const ordered = this.policy.order;
    const queue = ordered ? ordered.call(this.policy, this.waiting, this.context) : this.waiting;
    for (const req of [...queue]) {
      if (this.batch.freeSlots === 0) break;
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
    if (this.preemption.holding(req)) return this.resumeHeld(req);
    const resumesInPlace = req.dropped > 0; // it kept its newest blocks: refill the oldest
    const full = this.policy.admissionTokens(req);
    let prefix: PrefixEntry[];
    let distance = 0; // > 0: admitted layer-wise at this offload distance
    while (true) {
      prefix = req.swapped || resumesInPlace ? [] : this.prefix?.share(req) ?? [];
      // Layer-wise prefill (LayerKV): every prefill gets its layer split; null: it waits.
      const split = this.placement?.splitsPrefills
        ? this.placement.growSplit(req, prefix, full, this.running, this.context)
        : undefined;
      if (split === undefined ? this.pool.growAll(req.id, full) : split !== null) {
        distance = split ?? 0;
        break;
      }
      // Nothing runs, so nothing will free blocks: paused requests holding some give them up.
      const drop = this.running.length === 0 ? this.heldKvToDrop(req) : null;
      if (!resumesInPlace) this.pool.release(req.id);
      // Layers of requests paused holding their KV (OrbitFlow's removable cache) go first.
      if (!drop && this.preemption.evictHeld(req, full)) continue;
      if (!drop) return false;
      this.pool.release(drop.id);
      drop.forgetKv();
    }
    const { slot, order } = this.batch.seat(req);
    if (resumesInPlace) {
      req.resumeInPlace(slot, order);
      this.partialResumes++;
      this.step.seated(req);
      return true;
    }
    // At least the last position is computed again: its logits pick the next token.
    let cached = Math.min(prefix.length * this.pool.blockSize, req.prefillTarget - 1);
    if (req.swapped) {
      cached = Math.min(req.hostTokens, req.prefillTarget - 1);
      this.host!.swaps.swapIn(req, cached);
    }
    req.admit(slot, order, cached);
    this.prefix?.admitted(req, prefix);
    if (distance > 0) this.placement!.admittedLayerwise(req, distance);
    this.step.seated(req);
    return true;
  }

  /**
   * Readmits a request paused holding its KV (OrbitFlow's removable cache): its taken layers come
   * back from the host, and it computes only its last position again.
   */
  private resumeHeld(req: Request): boolean {
    if (!this.preemption.resumeHeld(req, this.policy.admissionTokens(req))) return false;
    const { slot, order } = this.batch.seat(req);
    req.admit(slot, order, Math.min(req.computed, req.prefillTarget - 1));
    this.step.seated(req);
    return true;
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

  private build(): BuiltStep | null {
    this.placement?.beforeStep(this.running);
    const writeThrough = this.host?.writeThroughBlocks ?? 0;
    if (writeThrough > 0) {
      // Before this step's rows: only blocks written by earlier steps are complete.
      for (const req of this.running) {
        // A request still recomputing its oldest blocks has none of them to copy yet.
        if (!req.refill && !this.tokenCached?.holds(req)) {
          this.host!.swaps.writeThrough(req, writeThrough);
        }
      }
    }
    this.step.begin();
    const held = this.policy.holdBack?.(this.running, this.context, this.waiting);
    this.holding = held?.size ?? 0;
    for (const req of [...this.running]) {
      if (req.state !== "decoding" || req.issued >= req.spec.maxTokens) continue;
      if (held?.has(req)) {
        this.heldRows++;
        continue;
      }
      this.decode(req);
    }
    for (const req of [...this.running]) {
      if (this.step.room <= 0) break;
      if (req.state === "prefilling") this.prefill(req);
    }
    this.placement?.afterRows(this.step.inStep);
    const moves = this.host?.tier.take() ?? { copies: [], landings: [] };
    const offload = this.placement?.take() ?? { prefetch: [], tables: [] };
    // A group only when this step made no decision and nothing in it needs the host in between.
    const quiet = this.waiting.length === 0 && this.holding === 0 && !this.tokenCached &&
      !this.placement && writeThrough === 0 && this.decisions === this.decisionsBefore &&
      this.running.every((r) => !r.grammar) && moves.copies.length === 0 &&
      moves.landings.length === 0 && offload.prefetch.length === 0 && offload.tables.length === 0;
    const k = quiet ? this.groupSteps() : 1;
    const group = k > 1 ? this.step.group(k, (req, tokens) => this.growQuietly(req, tokens)) : null;
    if (group) {
      this.groups++;
      this.groupedSteps += group.steps;
    }
    return this.step.finish(moves, offload, group ?? undefined);
  }

  /** Pauses and preemptions so far: a step that made any is no group. */
  private get decisions(): number {
    return this.policyPauses + this.preemption.count;
  }

  /** How many steps this step's decode rows may run as one group (1: no group). */
  private groupSteps(): number {
    const rows = this.step.decodeRows;
    if (rows === 0) return 1;
    const stepMs = this.context.stepMs(rows, rows) ?? this.measuredStepMs;
    return groupSize(this.decodeSteps, stepMs);
  }

  /** Blocks for `tokens` positions of `req` if the pool has them free: no one is preempted. */
  private growQuietly(req: Request, tokens: number): boolean {
    if (!this.pool.canGrowAll(req.id, tokens)) return false;
    const added = this.pool.growAll(req.id, tokens);
    if (!added) return false;
    this.step.grew(req, added);
    return true;
  }

  /** The measured time of one decode step (ms), for sizing groups when no cost model predicts. */
  observeStepMs(ms: number): void {
    if (Number.isFinite(ms) && ms > 0) this.measuredStepMs = ms;
  }

  /**
   * A decode row for `req`: the newest sampled id goes in at its next position, and is sampled.
   * A constrained request's rows name their tokens: the last sampled one, and those its grammar
   * forced since, which no row has computed yet.
   */
  private decode(req: Request): void {
    if (!req.maySample) return;
    const pos = req.promptLength + req.issued - 1;
    const first = req.grammar ? Math.min(req.computed, pos) : pos;
    // eLLM: the uncached oldest positions ride in the step before the row that reads their KV.
    const recompute = this.tokenCached?.recompute(req) ?? 0;
    if (recompute + pos - first + 1 > this.step.room) return;
    if (!this.grow(req, pos + 1)) return;
    if (this.placement && !this.placement.claim(req)) return;
    for (let p = 0; p < recompute; p++) this.row(req, p, req.tokenAt(p));
    this.tokenCached?.recomputed(req);
    for (let p = first; p < pos; p++) this.row(req, p, req.tokenAt(p));
    this.row(req, pos, req.grammar ? req.tokenAt(pos) : null);
    req.computeTo(pos + 1);
    this.prefix?.offer(req);
    this.step.sample(req);
  }

  /** A prefill chunk for `req`: dropped oldest positions first, then its next positions. */
  private prefill(req: Request): void {
    if (req.refill) {
      // The oldest positions, dropped while it was paused, are computed again first.
      const { from, to } = req.takeRefill(this.step.room);
      for (let pos = from; pos < to; pos++) this.row(req, pos, req.tokenAt(pos));
      if (req.refill) return;
    }
    let n = Math.min(req.prefillTarget - req.computed, this.step.room);
    // The last position's row samples: a constrained request's waits for its mask.
    if (!req.maySample) n = Math.min(n, req.prefillTarget - 1 - req.computed);
    if (n <= 0) return;
    if (!this.grow(req, req.computed + n)) return;
    if (this.placement && !this.placement.claim(req)) return;
    for (let pos = req.computed; pos < req.computed + n; pos++) {
      this.row(req, pos, req.tokenAt(pos));
    }
    req.computeTo(req.computed + n);
    this.prefix?.offer(req);
    if (req.computed < req.prefillTarget) return;
    req.startDecoding();
    if (req.spec.maxTokens === 0) req.end("length"); // nothing to sample: done once prefilled
    else this.step.sample(req);
  }

  /** Gives `req` blocks for `tokens` positions on every layer; false when it was preempted. */
  private grow(req: Request, tokens: number): boolean {
    // Its blocks behind the window go back first (not once it has rows in this step: a refill's
    // rows read further back than its next position's).
    if (!this.step.inStep.has(req) && !req.refill) this.window?.expire(req);
    if (!this.preemption.makeRoom(req, tokens, this.step.inStep)) return false;
    const added = this.pool.growAll(req.id, tokens);
    if (!added) throw new Error(`block pool refused request ${req.id} an allocation it said fits`);
    this.step.grew(req, added);
    return true;
  }

  private row(req: Request, pos: number, token: number | null): void {
    if (this.step.row(req, pos, token)) this.recomputedTokens++;
  }

  /**
   * Delivers a step's sampled tokens to their requests (none after a finish), and its landings. A
   * group's records come step by step; a request takes them in order until it finishes, and what
   * its row drew after that is dropped. Returns the tokens delivered.
   */
  deliver(step: Pick<BuiltStep, "owners" | "landings">, records: SampleRecord[]): number {
    this.host?.tier.land(step.landings);
    const { owners } = step;
    let delivered = 0;
    records.forEach((rec, i) => {
      const req = owners[i % owners.length];
      if (req.finish) return;
      req.accept(rec);
      delivered++;
    });
    return delivered;
  }

  failAll(message: string): void {
    for (const req of [...this.waiting, ...this.running]) req.end("error", message);
    this.reap();
  }
}
