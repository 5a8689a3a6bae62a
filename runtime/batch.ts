// Who waits and who runs: the queue (arrival order; a preempted request goes back to its head, to
// resume before anyone new), the running batch (admission order, oldest first) and its slots. A
// running request holds one slot, a batch row of the engine's, until it leaves.

import type { Request } from "./request/request.ts";

export class Batch {
  /** Requests waiting for a slot: arrival order, with preempted ones put back at the head. */
  readonly waiting: Request[] = [];
  /** Admitted requests, oldest admission first. */
  readonly running: Request[] = [];
  private readonly free: number[];
  private admissions = 0;

  constructor(maxSlots: number) {
    this.free = Array.from({ length: maxSlots }, (_, i) => maxSlots - 1 - i);
  }

  /** Slots no request holds. */
  get freeSlots(): number {
    return this.free.length;
  }

  /** A new request waits at the tail. */
  enqueue(req: Request): void {
    this.waiting.push(req);
  }

  /** A preempted request waits at the head. */
  requeue(req: Request): void {
    this.waiting.unshift(req);
  }

  /** Takes a waiting request off the queue (it was refused, or has ended). */
  withdraw(req: Request): void {
    this.waiting.splice(this.waiting.indexOf(req), 1);
  }

  /**
   * Moves a waiting request into the batch: returns the slot it takes and its admission order
   * (the caller tells the request).
   */
  seat(req: Request): { slot: number; order: number } {
    this.withdraw(req);
    this.running.push(req);
    return { slot: this.free.pop()!, order: this.admissions++ };
  }

  /** A running request gives its slot back and leaves the batch. */
  leave(req: Request): void {
    this.free.push(req.slot);
    this.running.splice(this.running.indexOf(req), 1);
  }
}
