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
import { type Pending, PlanRequests } from "./plan_requests.ts";
import type { PlanInput } from "./plan_types.ts";

export class InlinePlanner extends PlanRequests implements PlanSource {
  request(input: PlanInput): number {
    if (this.closed) throw new Error("inline planner is closed");
    const p = this.pending(input);
    if (this.running) {
      this.next?.done("superseded");
      this.next = p;
    } else {
      this.running = p;
      queueMicrotask(() => this.solveAll());
    }
    return p.seq;
  }

  close(): void {
    this.closed = true;
    for (const p of [this.running, this.next]) p?.done("superseded");
    this.running = this.next = undefined;
  }

  /** Solves the running request, then the one that waited behind it. */
  private solveAll(): void {
    while (this.running) {
      this.solve(this.running);
      this.running = this.next;
      this.next = undefined;
    }
  }

  private solve(p: Pending): void {
    try {
      // No deadline: a wall-clock limit would make the answer depend on the machine's load.
      this.answer(p, { plan: orbitPlan({ ...p.input, timeoutMs: Infinity }) });
    } catch (err) {
      this.answer(p, { error: err instanceof Error ? err.message : String(err) });
    }
  }
}
