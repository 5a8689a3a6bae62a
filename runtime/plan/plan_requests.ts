// What every source of OrbitFlow's plans keeps of the requests made to it (the planner Worker's
// client, planner_client.ts, and the inline planner of simulations, inline_planner.ts): one solve
// at a time, and of the requests made meanwhile only the newest waits ("next"; only the latest
// batch matters); the newest plan that replaced the one in force; how each request ended. A
// source says how it solves, and settles each solve through `answer`.

import type { Plan, PlanInput } from "./plan_types.ts";

/** What became of a request. */
export type Outcome = "planned" | "kept-last" | "abandoned" | "superseded" | "failed";

/**
 * Whether an answer replaces the plan in force: a feasible plan does, and so does one naming a
 * request to pause. No answer in time, or no plan at all without someone to pause, is nothing
 * better to go on.
 */
export function replacesPlan(plan: Plan): boolean {
  return plan.feasible || plan.pause !== undefined;
}

export interface Pending {
  seq: number;
  input: PlanInput;
  done: (o: Outcome) => void;
  settled: Promise<Outcome>;
}

export abstract class PlanRequests<P extends Pending = Pending> {
  /** Solves abandoned past their deadline. */
  abandoned = 0;
  /** Solves that threw (their message in lastError). */
  failed = 0;
  lastError?: string;
  protected running?: P;
  protected next?: Pending;
  protected closed = false;
  private newest?: { seq: number; plan: Plan };
  private seq = 0;

  /** Asks for a plan of `input`; returns its sequence number at once. */
  abstract request(input: PlanInput): number;
  /** Stops solving; pending requests settle as superseded, later requests throw. */
  abstract close(): void;

  /** The newest finished plan, if any. */
  latest(): Plan | undefined {
    return this.newest?.plan;
  }

  /** The sequence number of the request the newest plan answers (0: none yet). */
  get latestSeq(): number {
    return this.newest?.seq ?? 0;
  }

  /** Whether a solve is running or waiting. */
  get busy(): boolean {
    return this.running !== undefined || this.next !== undefined;
  }

  /** Resolves when request `seq` is answered, abandoned or replaced (for tests and benches). */
  settled(seq: number): Promise<Outcome> {
    for (const p of [this.running, this.next]) if (p?.seq === seq) return p.settled;
    return Promise.resolve(seq <= this.latestSeq ? "planned" : "superseded");
  }

  /** A new request of `input`, numbered after every earlier one. */
  protected pending(input: PlanInput): Pending {
    let done!: (o: Outcome) => void;
    const settled = new Promise<Outcome>((resolve) => (done = resolve));
    return { seq: ++this.seq, input, done, settled };
  }

  /** Settles `p` with its solve's plan, or the error that solve threw. */
  protected answer(p: Pending, answer: { plan: Plan } | { error: string }): void {
    if ("error" in answer) {
      this.failed++;
      this.lastError = answer.error;
      p.done("failed");
    } else if (replacesPlan(answer.plan)) {
      this.newest = { seq: p.seq, plan: answer.plan };
      p.done("planned");
    } else {
      p.done("kept-last");
    }
  }
}
