// OrbitFlow's planner driving the offload executor (`--offload orbit`). Before each step the
// scheduler shows it the running batch; it asks the planner Worker for a new plan only when the
// batch changed, the window the planner chose for the plan ran out, or measured steps drifted
// from the plan's prediction
// (replan.ts), and answers each request's distance from the newest finished plan. It never waits
// for a solve: until the first plan arrives every request keeps all its layers, and a request the
// plan does not know (just admitted, still prefilling) keeps them too.
//
// What the planner is told: the decoding requests (their context and where it stops, blocks per
// layer, buffered tokens, SLO, reading rate), the device blocks they may hold, and the cost
// model as re-fitted from the steps so far. The budget is the pool less what requests outside the
// plan hold; the prefetch region is reserved in the pool for good, so it is the budget's buffer
// term (OrbitFlow §3.3.1, Eq. 1), subtracted once, by the planner (regionReservedBlocks).

import type { CostModel, EngineInfo, StepPlan } from "../../engine/engine.ts";
import type { Request } from "../request/request.ts";
import type { RemovableStats } from "../kv/removable.ts";
import type { OffloadPlanner } from "./offload_planner.ts";
import { PlannerClient } from "./planner_client.ts";
import type { PlanInput, PlanRequest } from "./plan_types.ts";
import { type PlanInForce, type ReplanReason, shouldReplan } from "./replan.ts";

export interface OrbitOffloadOptions {
  info: Pick<EngineInfo, "numLayers" | "kvBlockBytes" | "blockSize">;
  /** The device pool: its size, and what a request holds in it over all layers. */
  pool: { readonly total: number; heldBy(id: number): number };
  /** The prefetch region: blocks per arena (the plan's cap) and in all (reserved in the pool). */
  region: { readonly regionBlocks: number; readonly regionTotal: number };
  /** The cost model as of now (re-fitted every step). */
  costs: () => CostModel | undefined;
  /** Decode steps a plan must hold for at least, Δ_min (default 16). */
  window?: number;
  /** The longest window the planner may choose, Δ_max (`--orbit-window-max`; default 128). */
  maxWindow?: number;
  /** The solver's time limit (default 100 ms); past it the last plan stays in force. */
  timeoutMs?: number;
  /** Drift of measured vs predicted step time that asks for a new plan (default replan.ts's). */
  driftFraction?: number;
  /** Where plans come from (default: a PlannerClient over the planner Worker). */
  client?: PlanSource;
  /**
   * Fig. 14a's ablation steps (`--orbit-plan`, `--orbit-pause`): "batch" plans one distance for
   * the whole batch (Batch-Uniform) instead of one per request; pauseResume false never pauses:
   * a batch the SLO bound cannot hold gets the fastest plan that fits memory (serve-all), and one
   * that memory cannot hold keeps the last plan while the pool's preemption takes what runs out.
   * Defaults: "request", true (OrbitFlow).
   */
  plan?: "request" | "batch";
  pauseResume?: boolean;
}

/** The part of PlannerClient this uses (tests plan inline, with no Worker). */
export type PlanSource = Pick<
  PlannerClient,
  "request" | "latest" | "latestSeq" | "busy" | "settled" | "close" | "abandoned" | "failed"
>;

export interface PlannerStats {
  /** Plans asked for, by why. */
  requested: Record<ReplanReason, number>;
  /** Plans received, and the solve time of the last one and of all together. */
  solves: number;
  lastSolveMs: number;
  solveMsTotal: number;
  /** Solves abandoned past their deadline, and ones that failed in the Worker. */
  abandoned: number;
  failed: number;
  /** The running request the newest plan would pause (no plan fits the whole batch). */
  pauseRequested?: number;
  /** Requests paused because no plan fitted them. */
  pauses: number;
  /** Paused requests readmitted once a completion and a feasible plan including them came. */
  resumes?: number;
  /** Plans asked for to check whether a paused request may come back. */
  resumeChecks?: number;
  /** What paused requests kept and gave up (the runtime's removable cache; kv/removable.ts). */
  lazyPause?: RemovableStats | null;
}

/** A request paused for want of a plan, waiting for the resume rule. */
interface Victim {
  req: Request;
  /** Completions counted when it paused, and at its last resume check (-1: none yet). */
  completions: number;
  checkedAt: number;
  checking?: boolean;
  /** A completion came and a feasible plan included it: it may be admitted. */
  cleared?: boolean;
}

/** OrbitFlow's Δ_min and Δ_max (the planner picks the window between them; §3.3.1). */
export const DEFAULT_MIN_WINDOW = 16;
export const DEFAULT_MAX_WINDOW = 128;

/** Steps a plan must have been measured over before drift can call for a new one. */
const MIN_OBSERVED = 3;
/** Weight of the newest step in the smoothed step time (one noisy step must not re-plan). */
const SMOOTHING = 0.3;

export class OrbitOffload implements OffloadPlanner {
  private readonly client: PlanSource;
  private readonly window: number;
  private readonly maxWindow: number;
  /** Steps seen (beforeStep calls): the clock of plan windows. */
  private step = 0;
  private inForce?: PlanInForce & { seq: number };
  /** The batch each plan asked for and not yet installed was made for, by sequence number. */
  private readonly asked = new Map<number, number[]>();
  /** Measured decode steps since the plan in force was installed, smoothed. */
  private measured = { ms: 0, n: 0 };
  private solveTimes: number[] = [];
  private running = new Set<number>();
  private closed = false;
  /** The plan whose pause was acted on. */
  private pausedForSeq = 0;
  private pauses = 0;
  /** Requests paused for want of a plan, in pause order, until they run again or end. */
  private readonly victims = new Map<number, Victim>();
  /** Requests that have left the batch finished (the resume rule waits for one). */
  private completions = 0;
  private last: readonly Request[] = [];
  private readonly counts: Required<
    Omit<PlannerStats, "pauseRequested" | "pauses" | "lazyPause">
  > = {
    requested: { "no-plan": 0, batch: 0, window: 0, drift: 0 },
    solves: 0,
    lastSolveMs: 0,
    solveMsTotal: 0,
    abandoned: 0,
    failed: 0,
    resumes: 0,
    resumeChecks: 0,
  };

  constructor(private readonly opts: OrbitOffloadOptions) {
    this.client = opts.client ?? new PlannerClient();
    this.window = opts.window ?? DEFAULT_MIN_WINDOW;
    this.maxWindow = Math.max(this.window, opts.maxWindow ?? DEFAULT_MAX_WINDOW);
  }

  beforeStep(running: readonly Request[]): void {
    this.step++;
    this.running = new Set(running.map((r) => r.id));
    for (const r of this.last) if (!this.running.has(r.id) && r.finish) this.completions++;
    this.last = [...running];
    this.install();
    this.trackVictims();
    if (this.closed) return;
    const decoding = running.filter((r) => r.state === "decoding");
    this.replan(decoding, running);
    // Asked last, so that a plan for the batch alone does not replace it while a solve runs.
    this.checkResume(decoding, running);
  }

  /** Asks for a plan of the decoding batch when replan.ts says it is time. */
  private replan(decoding: readonly Request[], running: readonly Request[]): void {
    if (decoding.length === 0) return;
    const batch = decoding.map((r) => r.id);
    const reason = shouldReplan(
      this.inForce,
      { batch, step: this.step, observedStepMs: this.observedStepMs() },
      this.opts.driftFraction,
    );
    if (!reason || this.askedFor(batch)) return;
    const input = this.inputOf(decoding, running);
    if (!input) return;
    const seq = this.client.request(input);
    this.asked.set(seq, batch);
    // Only the running solve and the one waiting can still answer; solves that never did (timed
    // out, abandoned) must not pile up here.
    if (this.asked.size > 8) this.asked.delete(this.asked.keys().next().value!);
    this.counts.requested[reason]++;
    this.client.settled(seq).then((outcome) => {
      const plan = this.client.latest();
      if (outcome !== "planned" || this.client.latestSeq !== seq || !plan) return;
      this.counts.solves++;
      this.counts.lastSolveMs = plan.solveMs;
      this.counts.solveMsTotal += plan.solveMs;
      if (this.solveTimes.length < 4096) this.solveTimes.push(plan.solveMs);
    });
  }

  /** The newest plan's distance for `req`; 0 (keep all) for a request it does not place. */
  distanceOf(req: Request): number {
    return this.client.latest()?.distances.get(req.id) ?? 0;
  }

  /**
   * OrbitFlow's Pause-Resume: the request the newest plan could not place is paused (once per
   * plan). It waits at the head of the queue until it may come back (feasible()).
   */
  toPause(running: readonly Request[]): Request[] {
    const id = this.pauseRequested();
    if (id === undefined || this.pausedForSeq === this.client.latestSeq) return [];
    this.pausedForSeq = this.client.latestSeq;
    this.pauses++;
    const named = running.filter((r) => r.id === id);
    for (const req of named) {
      this.victims.set(req.id, { req, completions: this.completions, checkedAt: -1 });
    }
    return named;
  }

  /**
   * Whether admissions may go on: not while a plan needs a pause, nor while a paused request waits
   * for its resume (OrbitFlow §3.4): it comes back only once some request in flight has
   * completed since it paused and a plan including it is feasible (checkResume), so it does not
   * come straight back into the batch that could not hold it. It heads the queue, so nothing
   * overtakes it meanwhile.
   */
  feasible(): boolean {
    if (this.pauseRequested() !== undefined) return false;
    for (const v of this.victims.values()) if (!v.cleared) return false;
    return true;
  }

  /** The running request the newest plan would pause, because no plan fits the whole batch. */
  pauseRequested(): number | undefined {
    const pause = this.client.latest()?.pause;
    return pause !== undefined && this.running.has(pause) ? pause : undefined;
  }

  /** Feeds one delivered step's measured time (ms): pure decode steps are what plans predict. */
  observeStep(step: { plan: StepPlan }, ms: number): void {
    const rows = step.plan.rows.length;
    if (rows === 0 || rows !== step.plan.samples.length || !(ms >= 0)) return;
    const m = this.measured;
    m.ms = m.n === 0 ? ms : SMOOTHING * ms + (1 - SMOOTHING) * m.ms;
    m.n++;
  }

  stats(): PlannerStats {
    return {
      ...this.counts,
      requested: { ...this.counts.requested },
      abandoned: this.client.abandoned,
      failed: this.client.failed,
      pauseRequested: this.pauseRequested(),
      pauses: this.pauses,
    };
  }

  /** Solve times (ms) of the plans received since the last call, for the metrics histogram. */
  takeSolveTimes(): number[] {
    const t = this.solveTimes;
    this.solveTimes = [];
    return t;
  }

  /** Stops the planner's Worker; distances stay as the last plan said. Idempotent. */
  close(): void {
    this.closed = true;
    this.client.close();
  }

  /** Forgets victims that run again (resumed) or ended; one cleared and running counts a resume. */
  private trackVictims(): void {
    for (const [id, v] of this.victims) {
      if (this.running.has(id) && v.cleared) this.counts.resumes++;
      if (this.running.has(id) || v.req.finish) this.victims.delete(id);
    }
  }

  /**
   * The resume rule's plan check: for the longest-waiting victim not cleared, once a request has
   * completed since it paused (and since its last check), asks for a plan of the decoding batch
   * with it; a feasible answer that places it clears it. With nothing running there is nothing to
   * wait for, and it is cleared at once.
   */
  private checkResume(decoding: readonly Request[], running: readonly Request[]): void {
    const v = [...this.victims.values()].find((v) => !v.cleared);
    if (!v || v.checking) return;
    if (running.length === 0) {
      v.cleared = true;
      return;
    }
    if (this.completions <= Math.max(v.completions, v.checkedAt)) return;
    if (this.pauseRequested() !== undefined) return;
    const input = this.inputOf([...decoding, v.req], running);
    if (!input) return;
    const checkedBefore = v.checkedAt;
    v.checkedAt = this.completions;
    v.checking = true;
    const seq = this.client.request({ ...input, noPause: true });
    this.asked.set(seq, input.requests.map((r) => r.id));
    this.counts.resumeChecks++;
    this.client.settled(seq).then((outcome) => {
      v.checking = false;
      // No answer at all (replaced, abandoned, failed): check again at the next step.
      if (outcome !== "planned" && outcome !== "kept-last") v.checkedAt = checkedBefore;
      const plan = this.client.latest();
      if (outcome !== "planned" || this.client.latestSeq !== seq || !plan) return;
      if (plan.feasible && plan.pause === undefined && plan.distances.has(v.req.id)) {
        v.cleared = true;
      }
    });
  }

  /** Puts a newly finished plan in force: its window starts now, and its drift is measured anew. */
  private install(): void {
    const seq = this.client.latestSeq;
    const plan = this.client.latest();
    if (!plan || seq === (this.inForce?.seq ?? 0)) return;
    this.inForce = {
      seq,
      batch: this.asked.get(seq) ?? [...plan.distances.keys()],
      fromStep: this.step,
      // The window the planner chose for this plan (plan_batch.ts): when it runs out, re-plan.
      window: plan.window,
      predictedStepMs: plan.predictedStepMs,
    };
    for (const s of this.asked.keys()) if (s <= seq) this.asked.delete(s);
    this.measured = { ms: 0, n: 0 };
  }

  /** Whether a plan for these members is already being solved or waiting to be. */
  private askedFor(batch: readonly number[]): boolean {
    if (!this.client.busy) return false;
    const ids = new Set(batch);
    for (const [seq, b] of this.asked) {
      if (seq > this.client.latestSeq && b.length === ids.size && b.every((id) => ids.has(id))) {
        return true;
      }
    }
    return false;
  }

  /** The smoothed measured step, or the prediction itself until enough steps were measured. */
  private observedStepMs(): number {
    const predicted = this.inForce?.predictedStepMs ?? 0;
    return this.measured.n >= MIN_OBSERVED && Number.isFinite(predicted)
      ? this.measured.ms
      : predicted;
  }

  /** The planner's question for the decoding requests; undefined without a cost model. */
  private inputOf(
    decoding: readonly Request[],
    running: readonly Request[],
  ): PlanInput | undefined {
    const costs = this.opts.costs();
    if (!costs) return undefined;
    const { numLayers, kvBlockBytes, blockSize } = this.opts.info;
    const planned = new Set(decoding);
    const others = running.filter((r) => !planned.has(r))
      .reduce((n, r) => n + this.opts.pool.heldBy(r.id), 0);
    // A paused request (a resume check) is planned with all of its context back.
    const context = (r: Request) => r.state === "paused" ? r.prefillTarget : r.computed;
    const requests: PlanRequest[] = decoding.map((r) => ({
      id: r.id,
      tokens: context(r),
      // What it holds now; the planner grows it by the tokens of its window (blockTokens), up
      // to the context it stops at.
      blocksPerLayer: Math.ceil(context(r) / blockSize),
      finalTokens: r.promptLength + r.spec.maxTokens,
      bufferedTokens: r.buffer.occupancy().tokens,
      tbtSloMs: r.spec.slo.tbtMs,
      readingRate: r.spec.readingRate,
    }));
    return {
      requests,
      numLayers,
      blockBytes: kvBlockBytes,
      blockTokens: blockSize,
      budgetBlocks: Math.max(0, this.opts.pool.total - others),
      prefetchRegionBlocks: this.opts.region.regionBlocks,
      regionReservedBlocks: this.opts.region.regionTotal,
      costs,
      window: this.window,
      maxWindow: this.maxWindow,
      timeoutMs: this.opts.timeoutMs ?? 100,
      batchUniform: this.opts.plan === "batch",
      serveAll: this.opts.pauseResume === false,
    };
  }
}
