// What a scheduling policy decides; the scheduler (runtime/scheduler.ts) does the rest.
// Policies are pure: they read requests and the pool, and never touch the GPU.

import type { Request } from "../request.ts";

export interface SchedulingPolicy {
  readonly name: string;
  /**
   * KV positions a waiting request is given on every layer when it is admitted; it is admitted
   * only when they are free. Later positions are handed out on demand.
   */
  admissionTokens(req: Request): number;
  /**
   * The running request to preempt so that `needy` can have another block. Returning `needy`
   * itself preempts it. `running` is in admission order, oldest first.
   */
  pickVictim(running: readonly Request[], needy: Request): Request;
}
