// The KV space: where every request's KV lives, on both tiers, and every mechanism that moves it,
// wired in this one file. The scheduler owns one (as nano-vllm's scheduler owns its block manager)
// and asks it only a few things: free a request's KV, pause one, admit one, grow one (preempting
// the policy's victims when the pool is short), what to do before and after a step's rows, the
// copies the step must run, and whether the host is needed between steps.
//
// Each mechanism is a file of its own behind it, switched on by one line below:
//   the device pool                      kv/block_pool.ts (block groups: FastSwitch)
//   prefix caching on both tiers         prefix_cache.ts, kv/prefix_index.ts, kv/prefix_tier.ts
//   the host tier: swaps, write-through  kv/host_tier.ts, kv/swap.ts (FastSwitch's reuse)
//   what becomes of a victim's KV        preemption.ts, preempt_choice.ts (eLLM's partial drop)
//   offloaded layers and their planner   placement.ts, kv/offload.ts, plan/ (OrbitFlow)
//   layer-wise prefill                   placement.ts, layer_split.ts (LayerKV)
//   lazy pauses                          kv/removable.ts (OrbitFlow)
//   token-wise caching                   token_cached.ts, token_cache.ts (eLLM)
//   a sliding window's expired blocks    sliding_window.ts (Mistral)

import type { CostModel, KvPrefetch, TableWrite } from "../engine/engine.ts";
import type { KvCopy } from "../engine/kv/kv_copies.ts";
import type { PoolShape } from "../engine/kv/pool_shape.ts";
import { BlockPool } from "./kv/block_pool.ts";
import { HostTier, type Landing } from "./kv/host_tier.ts";
import { Offloader } from "./kv/offload.ts";
import { type PrefixEntry, PrefixIndex } from "./kv/prefix_index.ts";
import { PrefixTier } from "./kv/prefix_tier.ts";
import { RemovableCache, type RemovableStats } from "./kv/removable.ts";
import { Swapper } from "./kv/swap.ts";
import { Placement } from "./placement.ts";
import type { OffloadPlanner } from "./plan/offload_planner.ts";
import { OrbitOffload, type PlanSource } from "./plan/orbit_offload.ts";
import type { PolicyContext } from "./policy/policy.ts";
import { type Placing, type PreemptRule, RECOMPUTE } from "./policy/preset.ts";
import type { PreemptKind } from "./preempt_choice.ts";
import { Preemption, type Seats } from "./preemption.ts";
import { PrefixCache } from "./prefix_cache.ts";
import type { Request } from "./request/request.ts";
import { SlidingWindow } from "./sliding_window.ts";
import { TokenCached } from "./token_cached.ts";

/** Full blocks (per layer) written through per request per step: small copies beside each step. */
const WRITE_THROUGH_BLOCKS = 4;

/** The engine's KV geometry, as the space needs it. */
export interface KvShape extends PoolShape {
  /** Blocks of the host tier (absent or 0: none). */
  hostBlocks?: number;
  /** Bytes of one KV block (one layer), for predicted copy times (absent or 0: none). */
  kvBlockBytes?: number;
  /** The model's sliding window (Mistral), if it has one. */
  slidingWindow?: number | null;
}

/** What the space is made of: the engine's geometry and the switches of each mechanism. */
export interface KvSpaceOptions {
  shape: KvShape;
  /** What becomes of a victim's KV (default: recompute it). */
  preempt?: PreemptRule;
  /** Where running requests' layers live, and LayerKV's layer-wise prefill (default: all on the device). */
  placing?: Placing;
  prefixCache?: boolean;
  writeThrough?: boolean;
  /** Keep host copies valid after a swap-in (default true). */
  swapReuse?: boolean;
  /** eLLM's token-wise caching of running requests. */
  tokenCache?: boolean;
  /** The longest decode window OrbitFlow's planner may choose. */
  orbitWindowMax?: number;
  /** OrbitFlow's planner: one distance per request or per batch, and whether it pauses. */
  orbitPlan?: "request" | "batch";
  orbitPause?: boolean;
  /**
   * Who chooses each running request's offload distance, in place of the preset's (OrbitFlow's
   * planner, or uniform's one distance): any OffloadPlanner. Needs `placing` to offload.
   */
  planner?: OffloadPlanner;
  /**
   * Where OrbitFlow's planner gets its plans (default: its Worker, plan/planner_client.ts). A run
   * in fake time gives it plan/inline_planner.ts, which does not read the wall clock.
   */
  planSource?: PlanSource;
}

/** What the space asks of its scheduler, read when needed. */
export interface SpaceHooks {
  /** What policies read: the clock, free room, the cost model's predictions. */
  context(): PolicyContext;
  /** The engine's cost model as last re-fitted (for the offload planner). */
  costModel(): CostModel | undefined;
  /** Positions a queued request is given when it is admitted (the policy's). */
  admissionTokens(req: Request): number;
  /** The step being built must rewrite `req`'s whole block tables. */
  retable(req: Request): void;
}

/** How a request is admitted: what it holds, which its request learns once seated. */
export type Admission =
  /** Paused holding its KV (kv/removable.ts): its taken layers come back from the host. */
  | { kind: "held" }
  /** It kept its newest blocks: it refills the dropped oldest positions. */
  | { kind: "inPlace" }
  /** `cached` positions already in its blocks (a shared prefix, or swapped in); `distance` > 0:
   * admitted layer-wise with that offload distance. */
  | { kind: "fresh"; cached: number; prefix: PrefixEntry[]; distance: number };

export class KvSpace {
  /** Resumes that kept their newest KV and computed only the dropped oldest positions (eLLM). */
  partialResumes = 0;
  readonly pool: BlockPool;
  readonly prefixIndex: PrefixIndex | null;
  readonly host: HostTier | null;
  readonly swapper: Swapper | null;
  readonly prefixTier: PrefixTier | null;
  readonly offloader: Offloader | null;
  readonly planner: OrbitOffload | null;
  /** eLLM: running requests holding only their newest KV (null: `--token-cache off`). */
  readonly tokenCached: TokenCached | null;
  /** Frees blocks behind a sliding window (null: no window, or a tier that needs whole tables). */
  readonly window: SlidingWindow | null;
  private readonly prefix: PrefixCache | null;
  private readonly placement: Placement | null;
  private readonly preemption: Preemption;
  /** Full blocks (per layer) mirrored to the host per request per step; 0: no write-through. */
  private readonly writeThroughBlocks: number;

  /** `maxRows`: the most token rows in a step (the scheduler's limit). */
  constructor(o: KvSpaceOptions, maxRows: number, private readonly hooks: SpaceHooks) {
    const { shape, placing } = o;
    this.pool = new BlockPool(shape);
    const { numLayers, blockSize } = this.pool;
    this.prefixIndex = o.prefixCache ? new PrefixIndex(this.pool) : null;
    const hostBlocks = shape.hostBlocks ?? 0;
    this.host = hostBlocks > 0 ? new HostTier(this.pool, hostBlocks) : null;
    // The prefetch region is set aside now, before anyone holds a block.
    this.offloader = placing && (placing.offloads || placing.layerwisePrefill)
      ? new Offloader(
        this.pool,
        this.host!,
        placing.prefetchBlocks ?? Math.ceil(this.pool.total / numLayers),
      )
      : null;
    this.planner = placing?.offload === "orbit"
      ? new OrbitOffload({
        info: { numLayers, blockSize, kvBlockBytes: shape.kvBlockBytes ?? 0 },
        pool: this.pool,
        region: this.offloader!,
        costs: () => hooks.costModel(), // re-fitted every step
        maxWindow: o.orbitWindowMax,
        client: o.planSource,
        plan: o.orbitPlan,
        pauseResume: o.orbitPause,
      })
      : null;
    this.swapper = this.host ? new Swapper(this.host, o.swapReuse ?? true) : null;
    this.prefixTier = this.prefixIndex && this.host
      ? new PrefixTier(this.prefixIndex, this.host)
      : null;
    this.prefix = this.prefixIndex ? new PrefixCache(this.prefixIndex, this.pool) : null;
    this.writeThroughBlocks = this.host && o.writeThrough ? WRITE_THROUGH_BLOCKS : 0;
    const distance = placing?.distance ?? 0;
    this.placement = this.offloader
      ? new Placement(this.pool, this.offloader, maxRows, {
        distance: distance > 0 ? () => distance : undefined,
        planner: o.planner ?? this.planner ?? undefined,
        layerwisePrefill: placing!.layerwisePrefill,
      }, this.prefix)
      : null;
    const host = this.host && this.swapper ? { tier: this.host, swaps: this.swapper } : null;
    this.tokenCached = o.tokenCache
      ? new TokenCached({
        pool: this.pool,
        maxRows: maxRows,
        stepMs: (rows) => hooks.context().stepMs(rows, 0),
        hidden: (shape.kvBlockBytes ?? 0) / (4 * blockSize), // eLLM's 4Lh bytes a token (bf16)
        admissionTokens: (req) => hooks.admissionTokens(req),
        retable: (req) => hooks.retable(req),
        host: this.host,
        placement: this.placement,
        prefix: this.prefix,
      })
      : null;
    // The host tier, offloading and token-wise caching work on whole tables by position.
    const wholeTables = this.host !== null || this.placement !== null || this.tokenCached !== null;
    this.window = shape.slidingWindow && !wholeTables
      ? new SlidingWindow(this.pool, shape.slidingWindow)
      : null;
    this.preemption = new Preemption({
      pool: this.pool,
      rule: o.preempt ?? RECOMPUTE,
      get context() {
        return hooks.context();
      },
      maxRows: maxRows,
      host,
      placement: this.placement,
      prefix: this.prefix,
      tokenCached: this.tokenCached,
      // OrbitFlow's lazy pause: the planner's victims keep their KV until room is claimed.
      removable: this.placement && this.host ? new RemovableCache(this.pool, this.host) : null,
    });
  }

  // ---- what it reports ----

  /** Preemptions so far, in all and by what became of the victim's KV (they add up). */
  get preemptions(): number {
    return this.preemption.count;
  }

  get preemptChoices(): Readonly<Record<PreemptKind, number>> {
    return this.preemption.choices;
  }

  /** OrbitFlow's lazy pauses: what paused requests kept and gave up (null without them). */
  get removable(): RemovableStats | null {
    return this.preemption.removable;
  }

  /** Requests admitted by layer-wise prefill with some layers offloaded. */
  get layerwiseAdmissions(): number {
    return this.placement?.layerwiseAdmissions ?? 0;
  }

  /** Admissions given a layer split by layer-wise prefill, whole ones included. */
  get prefillSplits(): number {
    return this.placement?.prefillSplits ?? 0;
  }

  /** Kept layers LayerKV's Eq. 5 relief sent to the host (placement.ts). */
  get reliefLayers(): number {
    return this.placement?.reliefLayers ?? 0;
  }

  // ---- the verbs ----

  /** Frees what `req` held on both tiers; `running`: it held a slot, and placement and caching. */
  release(req: Request, running: boolean): void {
    if (running) {
      this.placement?.forget(req, false);
      this.tokenCached?.forget(req);
    }
    this.host?.release(req);
    this.pool.release(req.id); // a waiting request may hold its newest blocks (paused so)
  }

  /** Running requests the offload planner could not keep (no feasible plan). */
  plannerPauses(running: readonly Request[]): Request[] {
    return this.placement?.toPause(running) ?? [];
  }

  /** Pauses a running request the policy or the planner (`byPlanner`: lazily) named. */
  pause(req: Request, byPlanner: boolean, seats: Seats): void {
    this.preemption.pause(req, byPlanner, seats);
  }

  /**
   * eLLM: before admission, how much of each running request's oldest KV stays uncached, and which
   * running requests the rule's batch size leaves out (preempted, newest first).
   */
  beforeAdmission(
    running: readonly Request[],
    waiting: readonly Request[],
    freeSlots: number,
    seats: Seats,
  ) {
    if (!this.tokenCached) return;
    this.tokenCached.adjust(running, waiting, freeSlots);
    for (const req of this.tokenCached.beyond(running)) this.preemption.pause(req, false, seats);
  }

  /** False while the offload planner's last plan needed a pause: nobody is admitted. */
  get admitting(): boolean {
    return !this.placement || this.placement.feasible;
  }

  /**
   * Gives waiting `req` its admission KV (`full` positions on every layer), sharing what the
   * prefix cache holds and, with layer-wise prefill, choosing its layer split; null (nothing held
   * for it) when it does not fit. With nothing running, nothing will free blocks: requests paused
   * holding KV give it up, newest first.
   */
  admit(req: Request, full: number, batch: Queues): Admission | null {
    if (this.tokenCached && !this.tokenCached.admits(batch.running.length)) return null;
    if (this.preemption.holding(req)) {
      return this.preemption.resumeHeld(req, full) ? { kind: "held" } : null;
    }
    const resumesInPlace = req.dropped > 0; // it kept its newest blocks: refill the oldest
    let prefix: PrefixEntry[];
    let distance = 0; // > 0: admitted layer-wise at this offload distance
    while (true) {
      prefix = req.swapped || resumesInPlace ? [] : this.prefix?.share(req) ?? [];
      // Layer-wise prefill (LayerKV): every prefill gets its layer split; null: it waits.
      const split = this.placement?.splitsPrefills
        ? this.placement.growSplit(req, prefix, full, batch.running, this.hooks.context())
        : undefined;
      if (split === undefined ? this.pool.growAll(req.id, full) : split !== null) {
        distance = split ?? 0;
        break;
      }
      const drop = batch.running.length === 0 ? heldKvToDrop(req, batch.waiting, this.pool) : null;
      if (!resumesInPlace) this.pool.release(req.id);
      // Layers of requests paused holding their KV (OrbitFlow's removable cache) go first.
      if (!drop && this.preemption.evictHeld(req, full)) continue;
      if (!drop) return null;
      this.pool.release(drop.id);
      drop.forgetKv();
    }
    if (resumesInPlace) return { kind: "inPlace" };
    // At least the last position is computed again: its logits pick the next token.
    let cached = Math.min(prefix.length * this.pool.blockSize, req.prefillTarget - 1);
    if (req.swapped) {
      cached = Math.min(req.hostTokens, req.prefillTarget - 1);
      this.swapper!.swapIn(req, cached);
    }
    return { kind: "fresh", cached, prefix, distance };
  }

  /**
   * `req` takes batch slot `slot` as `admission` said (its admission `order`), and its KV starts
   * from there; the prefix cache and its placement learn of it.
   */
  seat(req: Request, admission: Admission, { slot, order }: { slot: number; order: number }) {
    if (admission.kind === "inPlace") {
      req.resumeInPlace(slot, order);
      this.partialResumes++;
      return;
    }
    if (admission.kind === "held") {
      // Its KV is whole again: it computes only its last position again, for its logits.
      req.admit(slot, order, Math.min(req.computed, req.prefillTarget - 1));
      return;
    }
    req.admit(slot, order, admission.cached);
    this.prefix?.admitted(req, admission.prefix);
    if (admission.distance > 0) this.placement!.admittedLayerwise(req, admission.distance);
  }

  /**
   * Before a step's rows: running requests get the distance asked for, landed offloaded blocks go,
   * and full blocks written by earlier steps are mirrored to the host (write-through).
   */
  beforeStep(running: readonly Request[]): void {
    this.placement?.beforeStep(running);
    if (this.writeThroughBlocks === 0) return;
    for (const req of running) {
      // A request still recomputing its oldest blocks has none of them to copy yet.
      if (!req.refill && !this.tokenCached?.holds(req)) {
        this.swapper!.writeThrough(req, this.writeThroughBlocks);
      }
    }
  }

  /**
   * Blocks for `tokens` positions of `req` on every layer, preempting the policy's victims while
   * the pool is short: the blocks added per layer, or null when `req` itself was preempted.
   */
  grow(req: Request, tokens: number, seats: Seats): number[][] | null {
    // Its blocks behind the window go back first (not once it has rows in this step: a refill's
    // rows read further back than its next position's).
    if (!seats.inStep(req) && !req.refill) this.window?.expire(req);
    if (!this.preemption.makeRoom(req, tokens, seats)) return null;
    const added = this.pool.growAll(req.id, tokens);
    if (!added) throw new Error(`block pool refused request ${req.id} an allocation it said fits`);
    return added;
  }

  /** Blocks for `tokens` positions of `req` if the pool has them free (no one is preempted). */
  growIfFree(req: Request, tokens: number): number[][] | null {
    return this.pool.growAll(req.id, tokens); // null, with nothing changed, when short
  }

  /** Claims prefetch room for `req`'s offloaded layers in this step; false: it sits it out. */
  claim(req: Request): boolean {
    return !this.placement || this.placement.claim(req);
  }

  /** eLLM: `req`'s uncached oldest positions, computed again before its decode row. */
  recomputeRows(req: Request): number {
    return this.tokenCached?.recompute(req) ?? 0;
  }

  /** `req`'s decode row carried its recompute rows. */
  recomputed(req: Request): void {
    this.tokenCached?.recomputed(req);
  }

  /** `req`'s rows wrote KV: its full blocks are offered to the prefix cache. */
  wrote(req: Request): void {
    this.prefix?.offer(req);
  }

  /**
   * `req`'s drafts were verified (speculative/verify.ts): the blocks wholly past the KV it keeps,
   * which only rejected drafts wrote, go back to the pool now rather than when it ends.
   */
  settled(req: Request): void {
    this.pool.truncate(req.id, req.computed);
  }

  /** After a step's rows: layer-wise prefill copies out what they wrote, after their layers. */
  afterRows(inStep: Iterable<Request>): void {
    this.placement?.afterRows(inStep);
  }

  /** The copies the step must run (both tiers, the prefetch region), and the host's landings. */
  takeCopies(): StepCopies {
    return {
      moves: this.host?.take() ?? { copies: [], landings: [] },
      offload: this.placement?.take() ?? { prefetch: [], tables: [] },
    };
  }

  /**
   * Whether nothing needs the host between this step and the next: then several decode steps may
   * run as one submission.
   */
  quiet({ moves, offload }: StepCopies): boolean {
    return (this.tokenCached?.whole ?? true) && !this.placement && this.writeThroughBlocks === 0 &&
      moves.copies.length === 0 && moves.landings.length === 0 &&
      offload.prefetch.length === 0 && offload.tables.length === 0;
  }

  /** A delivered step's host copies have landed. */
  land(landings: readonly Landing[]): void {
    this.host?.land(landings);
  }
}

/** The scheduler's queues, as admission reads them. */
export interface Queues {
  readonly running: readonly Request[];
  readonly waiting: readonly Request[];
}

/** A step's copies: the host tier's, and the offloaded layers' prefetches and table entries. */
export interface StepCopies {
  moves: { copies: KvCopy[]; landings: Landing[]; afterLayer?: KvCopy[] };
  offload: { prefetch: KvPrefetch[]; tables: TableWrite[] };
}

/**
 * The newest paused request other than `head` still holding KV: freeing it (it will recompute it
 * all) may let `head` be admitted. Null when there is none.
 */
function heldKvToDrop(head: Request, waiting: readonly Request[], pool: BlockPool): Request | null {
  for (const req of [...waiting].reverse()) {
    if (req === head || pool.heldBy(req.id) === 0 || req.swapped) continue;
    return req;
  }
  return null;
}
