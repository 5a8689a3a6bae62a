// Preemption: making room in the device pool when a running request needs blocks that are not
// free, and pausing requests that a policy or planner names. The policy names the victim; the
// preset's rule (or, with `--recompute auto`, the cost model: preempt_choice.ts) says what becomes
// of its KV:
//
//   swap        copied to the host tier; it resumes by copying it back;
//   dropAll     freed; it resumes by prefilling its prompt and generated ids again (vLLM);
//   dropOldest  only its oldest blocks freed, as few as make the room; it keeps its slot's KV for
//               the rest and resumes by computing the dropped positions again (eLLM).
//
// A victim leaves the batch and waits at the head of the queue; its stream plays on from its
// token buffer. A request the offload planner pauses may instead keep its KV in the
// removable cache (kv/removable.ts), which gives it up layer by layer only when room is claimed.

import type { BlockPool } from "./kv/block_pool.ts";
import type { HostTier } from "./kv/host_tier.ts";
import type { Swapper } from "./kv/swap.ts";
import type { Placement } from "./placement.ts";
import type { Batch } from "./batch.ts";
import type { PolicyContext, SchedulingPolicy } from "./policy/policy.ts";
import type { PreemptRule } from "./policy/preset.ts";
import { choosePreemption, type PreemptKind } from "./preempt_choice.ts";
import type { PrefixCache } from "./prefix_cache.ts";
import type { Request } from "./request/request.ts";
import type { SlidingWindow } from "./sliding_window.ts";
import type { RemovableCache, RemovableStats } from "./kv/removable.ts";
import type { TokenCached } from "./token_cached.ts";

/**
 * How preemption reaches the batch, which the scheduler keeps: who the policy names as a victim,
 * who has rows in the step being built, and how a victim leaves for the head of the queue.
 */
export interface Seats {
  /** The policy's victim so that `needy` can grow: `needy`, or a request without rows this step. */
  victimFor(needy: Request): Request;
  /** Whether `req` has rows in the step being built. */
  inStep(req: Request): boolean;
  /** `req` leaves the batch for the head of the queue, its KV kept as `kept` says. */
  unseat(req: Request, kept: KeptKv): void;
}

/**
 * The seats of `batch`, as the scheduler gives them: `policy` names the victim among the requests
 * without rows in the step being built (`inStep`).
 */
export function batchSeats(
  batch: Batch,
  policy: SchedulingPolicy,
  inStep: ReadonlySet<Request>,
): Seats {
  return {
    victimFor: (needy) =>
      policy.pickVictim(batch.running.filter((r) => r === needy || !inStep.has(r)), needy),
    inStep: (req) => inStep.has(req),
    unseat: (req, kept) => {
      batch.leave(req);
      if ("dropped" in kept) req.pauseKeepingNewest(kept.dropped);
      else req.pause(kept.swapped);
      batch.requeue(req);
    },
  };
}

/** What a victim keeps: nothing on the device (`swapped`: its KV is on the host), or its newest
 * KV with its first `dropped` positions to compute again. */
export type KeptKv = { swapped: boolean } | { dropped: number };

/** What preemption works with: the pool and the tiers a victim's KV can go to. */
export interface PreemptionParts {
  pool: BlockPool;
  rule: PreemptRule;
  context: PolicyContext;
  maxRows: number;
  host: { tier: HostTier; swaps: Swapper } | null;
  placement: Placement | null;
  prefix: PrefixCache | null;
  /** eLLM's token-wise caching of running requests (`--token-cache`), if on. */
  tokenCached?: TokenCached | null;
  /** Where lazily paused requests keep their KV (absent: every pause frees it at once). */
  removable?: RemovableCache | null;
  /** Frees blocks behind sliding windows, if the model has any and the tiers allow it. */
  window?: SlidingWindow | null;
}

export class Preemption {
  /** Preemptions, in all and by what became of the victim's KV (they add up). */
  count = 0;
  readonly choices: Record<PreemptKind, number> = { swap: 0, dropOldest: 0, dropAll: 0 };

  constructor(private readonly parts: PreemptionParts) {}

  /**
   * Makes room for every layer of `req` to hold `tokens` positions, preempting the policy's
   * victims while the pool is short; requests with rows in this step (`seats.inStep`) keep them and are
   * not preempted. False when `req` itself was.
   */
  makeRoom(req: Request, tokens: number, seats: Seats): boolean {
    const { pool } = this.parts;
    while (!pool.canGrowAll(req.id, tokens)) {
      // Layers of requests paused holding their KV go first, as few as make the room.
      if (this.parts.removable?.evictFor(req, tokens)) continue;
      const victim = seats.victimFor(req);
      // A token-cached victim's uncached positions are dropped ones now: never swapped whole.
      const lacking = this.parts.tokenCached?.settle(victim) ?? 0;
      const drop = victim === req ? 0 : Math.max(this.oldestToDrop(victim, req, tokens), lacking);
      const how = lacking > 0
        ? { kind: drop > 0 ? "dropOldest" as const : "dropAll" as const, blocks: drop }
        : this.howToPreempt(victim, drop);
      if (how.kind === "dropOldest") {
        this.dropOldest(victim, how.blocks, seats);
        continue;
      }
      this.preempt(victim, how.kind === "swap", seats);
      if (victim === req) return false;
    }
    return true;
  }

  /**
   * Pauses a running request a policy or planner named, its KV treated as the rule says; with
   * `lazily` (the offload planner's pauses), kept in the removable cache when there is one.
   */
  pause(req: Request, lazily: boolean, seats: Seats): void {
    const lacking = this.parts.tokenCached?.settle(req) ?? 0;
    if (lacking > 0) return this.dropOldest(req, lacking, seats);
    const { removable } = this.parts;
    if (lazily && removable && req.computed > 0 && !req.refill && req.dropped === 0) {
      this.pauseHolding(req, removable, seats);
      return;
    }
    this.preempt(req, this.howToPreempt(req, 0).kind === "swap", seats);
  }

  /** What the removable cache kept and gave up (null without one). */
  get removable(): RemovableStats | null {
    return this.parts.removable ? { ...this.parts.removable.stats } : null;
  }

  /** Takes held requests' layers, as few as let `req` hold `tokens` positions; false: none taken. */
  evictHeld(req: Request, tokens: number): boolean {
    return this.parts.removable?.evictFor(req, tokens) ?? false;
  }

  /** Whether `req` waits holding KV in the removable cache (it resumes through resumeHeld). */
  holding(req: Request): boolean {
    return this.parts.removable?.holds(req) ?? false;
  }

  /**
   * Readmits a request paused holding its KV, every layer able to hold `tokens` positions, its
   * taken layers coming back from the host; false (nothing changed) when the room is not there.
   */
  resumeHeld(req: Request, tokens: number): boolean {
    return this.parts.removable?.resume(req, tokens) ?? false;
  }

  /** A lazy pause: `req` leaves the batch keeping its device KV (kv/removable.ts). */
  private pauseHolding(req: Request, removable: RemovableCache, seats: Seats): void {
    const { placement, prefix } = this.parts;
    placement?.forget(req, true); // its layers' copies out land; its host copy stays
    prefix?.stop(req); // its blocks may leave the device
    seats.unseat(req, { dropped: 0 });
    removable.hold(req);
  }

  /**
   * What becomes of `victim`'s KV: with `auto`, the option the cost model predicts cheapest; else
   * the fixed choice. `dropBlocks`: the fewest oldest blocks whose drop makes the room asked for
   * (0: a partial drop is not possible).
   */
  private howToPreempt(victim: Request, dropBlocks: number): { kind: PreemptKind; blocks: number } {
    const { rule, context: ctx, pool, host } = this.parts;
    const B = pool.blockSize;
    if (!rule.auto || ctx.stepMs(1, 0) === null) {
      if (rule.fixed === "partial" && dropBlocks > 0) {
        return { kind: "dropOldest", blocks: dropBlocks };
      }
      return { kind: rule.fixed === "swap" ? "swap" : "dropAll", blocks: 0 };
    }
    // A request still computing its dropped oldest positions has no whole KV to copy out.
    const canSwap = host !== null && !victim.refill && victim.computed > 0 &&
      ctx.copyMs("out", 1) !== null && host.tier.pool.canGrowAll(victim.id, victim.computed);
    return choosePreemption({
      computed: victim.computed,
      target: victim.prefillTarget,
      hostBlocks: Math.floor(victim.hostIssued / B),
      canSwap,
      dropBlocks,
      slackMs: victim.buffer.occupancy().seconds * 1000 + (victim.spec.slo.tbtMs ?? 0),
    }, {
      blockSize: B,
      maxRows: this.parts.maxRows,
      stepMs: (rows) => ctx.stepMs(rows, 0)!,
      copyMs: (direction, blocks) => ctx.copyMs(direction, blocks)!,
    });
  }

  /**
   * eLLM: how many of `victim`'s oldest blocks (per layer) must go for `needy` to grow to
   * `tokens`; 0 when that would drop all its blocks, or it is still refilling, offloads layers or
   * has freed blocks behind a sliding window: then it can only be preempted whole.
   */
  private oldestToDrop(victim: Request, needy: Request, tokens: number): number {
    const { pool, placement, window } = this.parts;
    if (victim.refill || victim.computed === 0 || placement?.offloads(victim)) return 0;
    if (window?.hasExpired(victim)) return 0;
    const k = pool.missingPerLayer(needy.id, tokens);
    // Keep at least its newest block, else this is a plain preemption.
    return k < 1 || (k + 1) * pool.blockSize > victim.computed ? 0 : k;
  }

  /**
   * Frees `victim`'s `k` oldest blocks and pauses it holding the rest; on resume only the dropped
   * positions are computed again.
   */
  private dropOldest(victim: Request, k: number, seats: Seats): void {
    const { pool, host, prefix } = this.parts;
    host?.tier.release(victim); // its host copy no longer matches what it will hold
    pool.dropLeading(victim.id, k);
    prefix?.stop(victim); // its cached prefix blocks are no longer its own
    seats.unseat(victim, { dropped: k * pool.blockSize });
    this.count++;
    this.choices.dropOldest++;
  }

  /**
   * Frees `req`'s KV and slot and puts it back at the head of the queue; its stream stays open.
   * `swap`: its KV goes to the host tier, if that has room.
   */
  private preempt(req: Request, swap: boolean, seats: Seats): void {
    const { pool, host, placement } = this.parts;
    const swapped = swap && (host?.swaps.swapOut(req) ?? false);
    if (!swapped) host?.tier.release(req); // recomputed from its ids: drop any partial host copy
    placement?.forget(req, swapped);
    pool.release(req.id);
    seats.unseat(req, { swapped });
    this.count++;
    this.choices[swapped ? "swap" : "dropAll"]++;
  }
}
