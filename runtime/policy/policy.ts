// What a scheduling policy decides; the scheduler (runtime/scheduler.ts) does the rest.
// Policies are pure: they read requests and the pool, and never touch the GPU.

import type { Request } from "../request.ts";

export interface SchedulingPolicy {
  readonly name: string;
  /**
   * KV positions a waiting request must be able to hold on every layer before it is admitted. A
   * policy that reserves them (see `reserves`) gets them allocated at admission.
   */
  admissionTokens(req: Request): number;
  /** True when admission allocates admissionTokens up front, so a request never grows short. */
  readonly reserves: boolean;
  /**
   * The running request to preempt so that `needy` can have another block. Returning `needy`
   * itself preempts it. `running` is in admission order, oldest first.
   */
  pickVictim(running: readonly Request[], needy: Request): Request;
}
