// What a scheduling policy decides; the scheduler (runtime/scheduler.ts) does the rest.
// Policies are pure: they read requests, the pool's numbers and the cost model's predictions, and
// never touch the GPU. Only admissionTokens and pickVictim are required: the optional hooks let a
// policy reorder the queue (who is admitted next), hold admissions (SLO-aware admission), and
// pause running requests of its own accord (buffer-aware preemption) before each step.

import type { Request } from "../request/request.ts";

/** What a policy may read besides the requests: time, room, and predicted costs. */
export interface PolicyContext {
  /** Milliseconds on the runtime's clock (the token buffers' clock). */
  now(): number;
  /** Batch slots, and how many are free. */
  readonly maxSlots: number;
  readonly freeSlots: number;
  /** Most token rows per step (a prefill's chunk is at most this). */
  readonly maxRows: number;
  /** Tokens per KV block. */
  readonly blockSize: number;
  /** Device blocks per layer a request could still be given (free plus evictable cache). */
  readonly freeBlocksPerLayer: number;
  /** Device blocks per layer in all (what bounds how many requests fit at once). */
  readonly blocksPerLayer?: number;
  /** Whether a host tier exists to swap to. */
  readonly hostTier: boolean;
  /**
   * Predicted ms of one step with `rows` token rows of which `samples` are sampled, from the
   * engine's profiled (and re-fitted) cost model; null when there is none.
   */
  stepMs(rows: number, samples: number): number | null;
  /** Predicted ms to copy `blocks` KV blocks (per layer, all layers) between tiers; null: no model. */
  copyMs(direction: "in" | "out", blocksPerLayer: number): number | null;
}

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
  /**
   * The order in which waiting requests are offered admission (default: queue order — arrival,
   * preempted ones at the head). A request that does not fit stops admission for this step, so a
   * large request is never overtaken for ever.
   */
  order?(waiting: readonly Request[], ctx: PolicyContext): Request[];
  /** Whether `req` may be admitted now, given what runs (default: whenever its blocks are free). */
  mayAdmit?(req: Request, running: readonly Request[], ctx: PolicyContext): boolean;
  /**
   * Running requests to pause before this step so that waiting ones can run; their streams keep
   * playing from their token buffers. Called once per step, before admission.
   */
  pauseBeforeStep?(
    running: readonly Request[],
    waiting: readonly Request[],
    ctx: PolicyContext,
  ): Request[];
  /**
   * Decoding requests that sit this step out, keeping their KV: their readers have more than
   * enough buffered, so a token made now would only wait. Called once per step.
   */
  holdBack?(
    running: readonly Request[],
    ctx: PolicyContext,
    waiting: readonly Request[],
  ): ReadonlySet<Request>;
}
