// OrbitFlow's planner solved on the caller's thread, for runs in fake time (tests/sim/): it answers
// as the planner Worker does (planner_client.ts) but never reads the wall clock, so the same
// inputs give the same plans, run after run. The Worker's answers depend on the machine: a solve
// is cut off at a wall-clock deadline, and its answer lands whenever the Worker posts it, which a
// fake clock does not wait for. Here a solve has no deadline, and its answer lands on a microtask:
// after the step that asked has been built, as a Worker's does, so a plan applies from the next
// step (OrbitFlow solves one step ahead). The server keeps the Worker: a solve on the step loop's
// thread would delay steps.

import { orbitPlan } from "./orbit_planner.ts";
import type { PlanSource } from "./orbit_offload.ts";
import { type Outcome, replacesPlan } from "./planner_client.ts";
import type { Plan, PlanInput } from "./plan_types.ts";

interface Pending {
  seq: number;
  input: PlanInput;
  done: (o: Outcome) => void;
  settled: Promise<Outcome>;
}

export class InlinePlanner implements PlanSource {
  /** Always 0: with no deadline nothing is abandoned. */
  readonly abandoned = 0;
  /** Solves that threw (their message in lastError). */
  failed = 0;
  lastError?: string;
  // As in PlannerClient: one solve at a time, and of the requests made meanwhile only the newest
  // waits, so the two sources answer the same requests.
  private running?: Pending;
  private next?: Pending;
  private newest?: { seq: number; plan: Plan };
  private seq = 0;
  private closed = false;

  /** Asks for a plan of `input`; returns its sequence number at once. */
  request(input: PlanInput): number {
    if (this.closed) throw new Error("inline planner is closed");
    let done!: (o: Outcome) => void;
    const settled = new Promise<Outcome>((resolve) => (done = resolve));
    const p: Pending = { seq: ++this.seq, input, done, settled };
    if (this.running) {
      this.next?.done("superseded");
      this.next = p;
    } else {
      this.running = p;
      queueMicrotask(() => this.solveAll());
    }
    return p.seq;
  }

  latest(): Plan | undefined {
    return this.newest?.plan;
  }

  get latestSeq(): number {
    return this.newest?.seq ?? 0;
  }

  get busy(): boolean {
    return this.running !== undefined || this.next !== undefined;
  }

  settled(seq: number): Promise<Outcome> {
    for (const p of [this.running, this.next]) if (p?.seq === seq) return p.settled;
    return Promise.resolve(seq <= this.latestSeq ? "planned" : "superseded");
  }

  /** Pending requests settle as superseded; later requests throw. */
  close(): void {
    this.closed = true;
    for (const p of [this.running, this.next]) p?.done("superseded");
    this.running = this.next = undefined;
  }

  /** Solves the running request, then the one that waited behind it. */
  private solveAll(): void {
    while (this.running) {
      const p = this.running;
      p.done(this.solve(p));
      this.running = this.next;
      this.next = undefined;
    }
  }

  private solve(p: Pending): Outcome {
    try {
      // No deadline: a wall-clock limit would make the answer depend on the machine's load.
      const plan = orbitPlan({ ...p.input, timeoutMs: Infinity });
      if (!replacesPlan(plan)) return "kept-last";
      this.newest = { seq: p.seq, plan };
      return "planned";
    } catch (err) {
      this.failed++;
      this.lastError = err instanceof Error ? err.message : String(err);
      return "failed";
    }
  }
}
