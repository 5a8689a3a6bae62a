// Continuous batching over a KV space. Each call to schedule() is one step:
//
//   1. reap:    free what finished or cancelled requests held;
//   2. pause:   requests the policy (buffer-aware preemption) or the offload planner names leave
//               the batch, their streams playing on from their buffers;
//   3. admit:   in the policy's order (default: the queue's, paused requests first), while a slot
//               is free and the space can give the policy's admission KV;
//   4. build:   a decode row for every decoding request (and its drafts', speculative/), then
//               prefill chunks sharing the rows left (prefill_share.ts), each given its blocks
//               first (the space preempts the policy's victims when the pool is short). A step
//               with nothing to decide and nothing for the host between steps becomes a decode
//               group: k steps in one go;
//   5. deliver: the step's sampled tokens go to their requests (drafts verified), and the hidden
//               states read for embedding requests to theirs.
//
// It keeps the batch, the policy, the step builder, decode groups and speculation; where KV lives,
// and all that moves it, is its KV space's (kv_space.ts). Pure host logic: it returns a plan.

import type { CostModel, StepRecords } from "../engine/engine.ts";
import { Batch } from "./batch.ts";
import { DecodeGroups, type DecodeSteps } from "./decode_group.ts";
import { KvSpace, type KvSpaceOptions } from "./kv_space.ts";
import { policyContext } from "./policy/context.ts";
import type { PolicyContext, SchedulingPolicy } from "./policy/policy.ts";
import { sharePrefillRows } from "./prefill_share.ts";
import { batchSeats, type Seats } from "./preemption.ts";
import type { Request } from "./request/request.ts";
import { type BuiltStep, deliverRecords, StepBuilder, type StepLimits } from "./step_builder.ts";
import { Speculation } from "./speculative/speculation.ts";

/** Batch slots, a step's rows and table entries (maxRows bounds a prefill chunk's stall). */
export type SchedulerLimits = StepLimits & { maxSlots: number };

/** What a scheduler is made of. */
export interface SchedulerParts {
  /** Its KV space: the engine's geometry and which mechanisms are on. */
  kv: KvSpaceOptions;
  limits: SchedulerLimits;
  policy: SchedulingPolicy;
  /** The runtime's clock (ms; default performance.now), the cost model as last re-fitted. */
  time?: { now?: () => number; costModel?: () => CostModel | undefined };
  /** Multi-step decode: most steps per group and the time a group may take (default: none). */
  decodeSteps?: DecodeSteps;
  /** Speculative decoding: drafts per step and the drafter (default: none). */
  speculation?: Speculation;
}

export class Scheduler {
  policyPauses = 0; // running requests paused by the policy or the planner, not for a block
  heldRows = 0; // decode rows the policy held back (their readers had enough buffered)
  holding = 0; // requests held back in the last step built: the loop must look again soon
  readonly space: KvSpace; // where every request's KV lives, and what moves it
  /** What policies read: the clock, free room, the cost model's predictions. */
  readonly context: PolicyContext;
  readonly groups: DecodeGroups;
  readonly speculation: Speculation;
  private readonly batch: Batch;
  private readonly policy: SchedulingPolicy;
  private readonly step: StepBuilder;
  private readonly seats: Seats; // how the space preempts: the policy names, the batch loses
  private decisionsBefore = 0; // `decisions` when this step began

  constructor({ kv, limits, policy, time = {}, decodeSteps, speculation }: SchedulerParts) {
    this.policy = policy;
    this.speculation = speculation ?? new Speculation(0);
    this.batch = new Batch(limits.maxSlots);
    this.groups = new DecodeGroups(decodeSteps);
    const costModel = time.costModel ?? (() => undefined);
    this.space = new KvSpace(kv, limits.maxRows, {
      context: () => this.context,
      costModel,
      admissionTokens: (req) => policy.admissionTokens(req),
      retable: (req) => this.step.retable(req),
    });
    this.step = new StepBuilder(this.space.pool, limits);
    this.seats = batchSeats(this.batch, policy, this.step.inStep);
    this.context = policyContext({
      now: time.now ?? (() => performance.now()),
      maxSlots: limits.maxSlots,
      freeSlots: () => this.batch.freeSlots,
      maxRows: limits.maxRows,
      pool: this.space.pool,
      hostTier: this.space.host !== null,
      costModel,
      kvBlockBytes: kv.shape.kvBlockBytes ?? 0,
    });
  }

  /** Requests waiting (arrival order, preempted ones first), and admitted (oldest first). */
  get waiting(): readonly Request[] {
    return this.batch.waiting;
  }
  get running(): readonly Request[] {
    return this.batch.running;
  }
  get hasWork(): boolean {
    return this.waiting.length > 0 || this.running.length > 0;
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

  // What the space and the step builder count, read where the scheduler's counters are (the rest:
  // `space`). Recomputed: rows of positions computed before (their KV was lost meanwhile).
  get preemptions(): number {
    return this.space.preemptions;
  }
  get recomputedTokens(): number {
    return this.step.recomputed;
  }

  // ---- the step ----

  /** One step's plan, or null when nothing can run now. */
  schedule(): BuiltStep | null {
    this.decisionsBefore = this.decisions;
    this.reap();
    this.pauseByPolicy();
    this.space.beforeAdmission(this.running, this.waiting, this.batch.freeSlots, this.seats);
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
      this.space.release(req, false);
      this.batch.withdraw(req);
    }
    for (const req of this.running.filter((r) => r.cancelled || r.finish)) {
      req.end("cancelled");
      this.space.release(req, true);
      this.batch.leave(req);
    }
  }

  /** Pauses the running requests the policy or the offload planner (no feasible plan) names. */
  private pauseByPolicy(): void {
    const planned = new Set(this.space.plannerPauses(this.running));
    const named = new Set([
      ...this.policy.pauseBeforeStep?.(this.running, this.waiting, this.context) ?? [],
      ...planned,
    ]);
    for (const req of named) {
      if (!this.running.includes(req) || req.finish || req.refill) continue;
      this.space.pause(req, planned.has(req), this.seats);
      this.policyPauses++;
    }
  }

  /**
   * Admits waiting requests while a slot is free and the space can give their admission KV, in
   * the policy's order (default: queue order). A request that does not fit ends admission for
   * this step: no overtaking, so a large request is not passed over for ever.
   */
  admit(): void {
    if (!this.space.admitting) return;
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
      const admission = this.space.admit(req, this.policy.admissionTokens(req), this.batch);
      if (!admission) break;
      this.space.seat(req, admission, this.batch.seat(req));
      this.step.seated(req);
    }
  }

  private build(): BuiltStep | null {
    this.space.beforeStep(this.running);
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
    // Prefills share the rows the decodes leave; one may be preempted by an earlier one's growth.
    for (const [req, share] of sharePrefillRows(this.running, this.step.room)) {
      if (req.state === "prefilling") this.prefill(req, share);
    }
    this.space.afterRows(this.step.inStep);
    const copies = this.space.takeCopies();
    // A group only when this step made no decision and nothing in it needs the host in between.
    const quiet = this.waiting.length === 0 && this.holding === 0 &&
      this.decisions === this.decisionsBefore && this.space.quiet(copies) &&
      this.running.every((r) => !r.grammar && !this.speculation.wantsToDraft(r));
    const rows = this.step.decodeRows;
    const k = quiet ? this.groups.size(rows, () => this.context.stepMs(rows, rows)) : 1;
    // Its rows' blocks for every step of the group must be free: no one is preempted for them.
    const group = k > 1 ? this.step.group(k, (req, tokens) => this.grow(req, tokens, false)) : null;
    if (group) this.groups.built(group.steps);
    return this.step.finish(copies.moves, copies.offload, group ?? undefined);
  }

  /** Pauses and preemptions so far: a step that made any is no group. */
  private get decisions(): number {
    return this.policyPauses + this.space.preemptions;
  }

  /**
   * A decode row for `req`: its newest sampled id goes in at its next position, and is sampled. A
   * constrained request's rows name their tokens (the last sampled one, those its grammar forced
   * since); a speculating one's drafts follow, in free blocks (no one is preempted for a draft).
   */
  private decode(req: Request): void {
    if (!req.maySample || this.speculation.waits(req)) return;
    const pos = req.promptLength + req.issued - 1;
    const first = req.grammar ? Math.min(req.computed, pos) : pos;
    // Uncached oldest positions (token_cached.ts) ride in the step before the row that reads them.
    const recompute = this.space.recomputeRows(req);
    if (recompute + pos - first + 1 > this.step.room) return;
    if (!this.grow(req, pos + 1) || !this.space.claim(req)) return;
    this.step.known(req, 0, recompute);
    this.space.recomputed(req);
    this.step.known(req, first, pos);
    const named = req.grammar || this.speculation.namesToken(req);
    this.step.row(req, pos, named ? req.tokenAt(pos) : null);
    req.computeTo(pos + 1);
    this.space.wrote(req);
    this.step.sample(req);
    const grow = (drafts: number) => this.grow(req, pos + 1 + drafts, false);
    const drafts = this.speculation.propose(req, this.step.draftSpace(this.running.length), grow);
    if (drafts.length > 0) this.step.drafts(req, pos, drafts);
  }

  /** A prefill chunk of `share` rows at most: dropped oldest positions first, then its next. */
  private prefill(req: Request, share: number): void {
    if (req.refill) {
      // The oldest positions, dropped while it was paused, are computed again first.
      const { from, to } = req.takeRefill(share);
      this.step.known(req, from, to);
      if (req.refill) return;
      share -= to - from;
    }
    let n = Math.min(req.prefillTarget - req.computed, share);
    // The last position's row samples: a constrained request's waits for its mask.
    if (!req.maySample) n = Math.min(n, req.prefillTarget - 1 - req.computed);
    if (n <= 0) return;
    if (!this.grow(req, req.computed + n) || !this.space.claim(req)) return;
    this.step.known(req, req.computed, req.computed + n);
    if (req.pooled) this.step.pooled(req, req.computed, n);
    req.computeTo(req.computed + n);
    this.space.wrote(req);
    if (req.computed < req.prefillTarget) return;
    req.startDecoding();
    // An embedding request ends when its pooled rows are back (deliver).
    if (req.pooled) return;
    if (req.spec.maxTokens === 0) req.end("length"); // nothing to sample: done once prefilled
    else this.step.sample(req);
  }

  /** Blocks for `tokens` positions of `req` (every layer), preempting the policy's victims when
   * `preempting`: false when it was preempted, or (not preempting) the blocks were not free. */
  private grow(req: Request, tokens: number, preempting = true): boolean {
    const added = preempting
      ? this.space.grow(req, tokens, this.seats)
      : this.space.growIfFree(req, tokens);
    if (added) this.step.grew(req, added);
    return added !== null;
  }

  /** Delivers a step's landings, and its sampled tokens (drafts verified, rejected ones' blocks
   * freed). */
  deliver(step: Omit<BuiltStep, "plan">, records: StepRecords): number {
    this.space.land(step.landings);
    records.hidden?.forEach((vector, i) => step.readers![i].acceptHidden(vector));
    const delivered = deliverRecords(step.owners, records, step.runs, this.speculation);
    for (const run of step.runs ?? []) this.space.settled(step.owners[run.first]);
    return delivered;
  }

  failAll(message: string): void {
    for (const req of [...this.waiting, ...this.running]) req.end("error", message);
    this.reap();
  }
}
