// The step loop: ask the scheduler for a step, hand it to the engine, deliver what comes back.
// Steps are pipelined: up to `depth` steps are in the engine at once and their sampled ids are
// delivered as their readbacks arrive, so there is no GPU round trip between steps. A step may be
// a decode group (several decode steps in one submission, runtime/decode_group.ts): it counts as
// its steps, and each of them is timed as its share of the group. The loop only awaits promises,
// so the thread it runs on stays free for HTTP and timers.

import type { StepEngine, StepRecords } from "../engine/engine.ts";
import type { BuiltStep } from "./step_builder.ts";

/** What the loop asks of the scheduler (runtime/scheduler.ts). */
export interface StepSource {
  /** The next step, or null when nothing can run now. */
  schedule(): BuiltStep | null;
  /** A step's records are back: returns the tokens delivered (default: one per record). */
  deliver(step: BuiltStep, records: StepRecords): number | void;
  /** A step failed: every request ends with `message`. */
  failAll(message: string): void;
  /** Some request still waits or runs. */
  readonly hasWork: boolean;
  /** Requests the last step held back: the loop looks again soon even if nobody asks. */
  readonly holding: number;
}

/** How soon an idle loop looks again while the policy holds requests back (ms). */
const HOLD_RETRY_MS = 20;

interface InFlight {
  records: Promise<StepRecords>;
  step: BuiltStep;
  submittedAt: number;
}

export class StepLoop {
  steps = 0;
  tokens = 0;
  /** Step durations (ms) not yet collected by takeStepTimes (bounded, oldest kept). */
  private stepTimes: number[] = [];
  private lastDoneAt = 0;
  private readonly inflight: InFlight[] = [];
  private wake: (() => void) | null = null;
  private stopping = false;
  readonly finished: Promise<void>;

  constructor(
    private readonly engine: StepEngine,
    private readonly scheduler: StepSource,
    private readonly depth: number,
    private readonly now: () => number = () => performance.now(),
    /**
     * Told each delivered step and the time it took (ms), e.g. to re-fit the cost model; a decode
     * group's time per step.
     */
    private readonly onStepTimed: (step: BuiltStep, ms: number) => void = () => {},
  ) {
    this.finished = this.run();
  }

  /** New work or a cancel: wake the loop if it sleeps. */
  kick(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  /** Lets the loop return once every request has ended and every step has come back. */
  stop(): Promise<void> {
    this.stopping = true;
    this.kick();
    return this.finished;
  }

  takeStepTimes(): number[] {
    const t = this.stepTimes;
    this.stepTimes = [];
    return t;
  }

  private async run(): Promise<void> {
    while (true) {
      try {
        if (this.inflight.length >= this.depth) {
          await this.deliverOldest();
          continue;
        }
        const step = this.scheduler.schedule();
        if (step) {
          const records = this.engine.step(step.plan);
          records.catch(() => {}); // awaited in order below; this only marks a failure as handled
          this.inflight.push({ records, step, submittedAt: this.now() });
          this.steps += step.plan.group?.steps ?? 1;
        } else if (this.inflight.length > 0) {
          await this.deliverOldest();
        } else if (this.stopping && !this.scheduler.hasWork) {
          return;
        } else {
          // Requests held back by the policy resume as their buffers drain, which nothing
          // announces: look again shortly.
          const retry = this.scheduler.holding > 0
            ? setTimeout(() => this.kick(), HOLD_RETRY_MS)
            : undefined;
          await new Promise<void>((resolve) => this.wake = resolve);
          clearTimeout(retry);
        }
      } catch (err) {
        // A failed step fails the requests it could have touched; the loop itself keeps serving.
        const message = err instanceof Error ? err.message : String(err);
        console.error("sluice: engine step failed:", message);
        this.inflight.length = 0;
        this.scheduler.failAll(message);
      }
    }
  }

  private async deliverOldest(): Promise<void> {
    const step = this.inflight[0];
    const records = await step.records;
    this.inflight.shift();
    const delivered = this.scheduler.deliver(step.step, records);
    this.tokens += typeof delivered === "number" ? delivered : records.length;
    // The step's own time: from when it could start (submitted, and the one before it done).
    const now = this.now();
    const steps = step.step.plan.group?.steps ?? 1;
    const ms = (now - Math.max(step.submittedAt, this.lastDoneAt)) / steps;
    this.lastDoneAt = now;
    for (let i = 0; i < steps && this.stepTimes.length < 4096; i++) this.stepTimes.push(ms);
    this.onStepTimed(step.step, ms);
  }
}
