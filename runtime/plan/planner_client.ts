// The scheduler's handle on the offload planner: it asks for a plan a step ahead and reads the
// newest finished one, and neither ever waits. Solves run in a Worker, one at a time; a request
// made while one runs waits as "next", and a newer request replaces it (only the latest batch
// matters). A solve still running past its deadline is abandoned: the Worker is terminated and
// a fresh one takes the next request, and the last plan stays in force. A solve's deadline runs
// from when its Worker is ready (loading one takes longer than a solve on a cold start).

import { type Pending, PlanRequests } from "./plan_requests.ts";
import type { PlanInput } from "./plan_types.ts";
import type { FromPlanner, ToPlanner } from "./planner_protocol.ts";

export interface PlannerClientOptions {
  /** The Worker module (default planner_worker.ts; tests put a slow solver here). */
  workerUrl?: URL;
  /**
   * How long past the solver's own limit (input.timeoutMs) a solve may run before it is abandoned.
   * The solver's limit stops only its branch and bound; this catches the rest (default 100 ms).
   */
  graceMs?: number;
}

export class PlannerClient
  extends PlanRequests<Pending & { timer?: ReturnType<typeof setTimeout> }> {
  private worker?: Worker;
  private workerReady = false;

  constructor(private readonly opts: PlannerClientOptions = {}) {
    super();
  }

  request(input: PlanInput): number {
    if (this.closed) throw new Error("planner client is closed");
    const p = this.pending(input);
    this.next?.done("superseded");
    this.next = p;
    this.pump();
    return p.seq;
  }

  /** Stops the Worker and every timer; pending requests settle as superseded. */
  close(): void {
    this.closed = true;
    if (this.running) {
      clearTimeout(this.running.timer);
      this.running.done("superseded");
      this.running = undefined;
    }
    this.next?.done("superseded");
    this.next = undefined;
    this.worker?.terminate();
    this.worker = undefined;
  }

  private pump(): void {
    if (this.running || !this.next || this.closed) return;
    const p = this.next;
    this.next = undefined;
    this.running = p;
    const worker = this.ensureWorker();
    if (this.workerReady) this.startClock();
    worker.postMessage({ seq: p.seq, input: p.input } satisfies ToPlanner);
  }

  /** Starts the running solve's deadline. */
  private startClock(): void {
    const p = this.running;
    if (!p || p.timer !== undefined) return;
    p.timer = setTimeout(() => this.abandon(), p.input.timeoutMs + (this.opts.graceMs ?? 100));
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    // The URL is written inside `new Worker(...)` so `deno compile`'s --include check finds it.
    const worker = this.opts.workerUrl
      ? new Worker(this.opts.workerUrl.href, { type: "module" })
      : new Worker(new URL("./planner_worker.ts", import.meta.url).href, { type: "module" });
    this.workerReady = false;
    worker.onmessage = (e: MessageEvent<FromPlanner>) => {
      if ("ready" in e.data) {
        this.workerReady = true;
        this.startClock();
      } else this.answered(e.data);
    };
    worker.onerror = (e: ErrorEvent) => {
      e.preventDefault();
      this.lastError = e.message;
      this.abandon();
    };
    this.worker = worker;
    return worker;
  }

  private answered(msg: Exclude<FromPlanner, { ready: true }>): void {
    const p = this.running;
    if (!p || p.seq !== msg.seq) return; // from a Worker already abandoned
    clearTimeout(p.timer);
    this.running = undefined;
    this.answer(p, msg);
    this.pump();
  }

  /** The running solve is past its deadline: drop it and its Worker, keep the last plan. */
  private abandon(): void {
    const p = this.running;
    if (!p) return;
    clearTimeout(p.timer);
    this.running = undefined;
    this.abandoned++;
    this.worker?.terminate();
    this.worker = undefined;
    p.done("abandoned");
    this.pump();
  }
}
