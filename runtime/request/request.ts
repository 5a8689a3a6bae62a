// One request's life: a state machine that keeps everything needed to stop it and bring it back.
//
//   waiting ──admit──▶ prefilling ──last prompt chunk──▶ decoding ──▶ finished
//                          ▲   │                            │
//                          │   └──────── preempt ───────────┤
//                          └── resume ◀── paused ◀──────────┘
//
// A request keeps its prompt and every generated id, so a paused request resumes in any batch
// slot: swapped in from the host tier when its KV went there, else by prefilling prompt + generated
// ids again. The sampler's noise is hashed from (seed, position), so it continues with exactly the
// tokens it would have produced. Its tokens go into its token buffer, which the server drains at
// the reader's pace.
//
// Its fields are public to read (policies and the scheduler read them every step) and change only
// through its methods below: the transitions above, the rows and samples of each step, its host
// copy. (What the prefix cache holds for it is the cache's: runtime/prefix_cache.ts.) (Tests may set a field to stage a scene; runtime/ code may not,
// which tests/runtime/request_test.ts checks.)
//
// A constrained request carries its grammar (grammar/request_grammar.ts), which every delivered
// token advances; the grammar, not a step, may end it (complete) or hand it a token (forced).

import type { SampleRecord, SamplingParams } from "../../engine/engine.ts";
import type { RequestGrammar } from "../grammar/request_grammar.ts";
import { TokenPacer } from "./token_buffer.ts";

export type RequestState = "waiting" | "prefilling" | "decoding" | "paused" | "finished";

export interface TokenEvent {
  id: number;
  logprob: number;
  /** The top-K alternatives (id, logprob), when the request asked for them. */
  top: [number, number][];
  /** When its sample came back and it entered the token buffer (performance.now() ms). */
  generatedAt: number;
}

/**
 * Why a request ended. "cancelled": its client went away or asked; "shutdown": the server ended
 * it while stopping; "error": a step failed.
 */
export type FinishReason = "stop" | "length" | "cancelled" | "shutdown" | "error";

export interface FinishInfo {
  reason: FinishReason;
  promptTokens: number;
  completionTokens: number;
  error?: string;
}

export interface RequestSlo {
  /** Time to first token target. */
  ttftMs?: number;
  /** Time between tokens target. */
  tbtMs?: number;
}

export interface RequestSpec {
  ids: number[];
  maxTokens: number;
  sampling: SamplingParams;
  /** 0 = none; at most the engine's maxTopLogprobs. */
  topLogprobs: number;
  /** Token ids that end generation (not emitted). */
  stopIds: ReadonlySet<number>;
  /** Tokens per second the reader takes; 0 = unpaced. */
  readingRate: number;
  slo: RequestSlo;
  /** Its priority when submitted (lower runs first; default 0; runtime/policy/priority.ts). */
  priority?: number;
}

export class Request {
  state: RequestState = "waiting";
  /** Batch row while admitted (prefilling or decoding), else -1. */
  slot = -1;
  /** Generated ids delivered so far, in order (the stop token is not one of them). */
  readonly generated: number[] = [];
  /** Positions whose KV is on the device in the current residency (0 after a preemption). */
  computed = 0;
  /** High-water mark of positions it has computed (any residency): rows below it are recomputes. */
  computedHigh = 0;
  /** Samples submitted to the GPU over the request's life (delivered + in flight). */
  issued = 0;
  /** Times its KV was freed to make room for another request. */
  preemptions = 0;
  /** Leading positions whose KV has landed in the host tier (see runtime/kv/host_tier.ts). */
  hostTokens = 0;
  /** Leading positions whose KV is on the host once the copies in flight land. */
  hostIssued = 0;
  /** Bumped when its host blocks are released, so copies issued before can no longer land. */
  hostEpoch = 0;
  /** Paused with its KV in the host tier: it resumes by swapping in, not by recomputing. */
  swapped = false;
  /** Times its KV was swapped out. */
  swapsOut = 0;
  /** Paused holding its newest blocks: its first `dropped` positions' KV was freed (eLLM). */
  dropped = 0;
  /** After such a resume: the dropped positions still to compute again, before anything else. */
  refill: { next: number; end: number } | null = null;
  /** Order of (re)admission; the most recent is preempted first. */
  admittedAt = -1;
  /** Lower runs first (runtime/policy/priority.ts); its client may change it while it runs. */
  priority: number;
  cancelled = false;
  finish: FinishInfo | null = null;
  /** True when shutdown dropped tokens its reader had not yet taken. */
  streamCut = false;
  readonly buffer: TokenPacer<TokenEvent>;
  readonly done: Promise<FinishInfo>;
  private resolveDone!: (f: FinishInfo) => void;

  /**
   * @param grammar what its output is constrained to (null: nothing); it is the request's, and
   * disposed when the request ends.
   */
  constructor(
    readonly id: number,
    readonly spec: RequestSpec,
    readonly arrivedAt: number,
    readonly grammar: RequestGrammar | null = null,
  ) {
    this.priority = spec.priority ?? 0;
    this.buffer = new TokenPacer({ rate: spec.readingRate });
    this.done = new Promise((r) => this.resolveDone = r);
    grammar?.listen(() => this.grammarMoved());
  }

  /**
   * May sample now: unconstrained, or constrained with its last token back and the mask that
   * token leads to computed (a constrained request is never pipelined).
   */
  get maySample(): boolean {
    return this.grammar === null || (this.inflight === 0 && this.grammar.mask !== null);
  }

  get promptLength(): number {
    return this.spec.ids.length;
  }

  /** Samples issued whose records have not come back yet. */
  get inflight(): number {
    return this.issued - this.generated.length;
  }

  /** Tokens whose KV a (re)started prefill must compute: the prompt and every generated id. */
  get prefillTarget(): number {
    return this.promptLength + this.generated.length;
  }

  /** The token at `pos` of prompt + generated ids. */
  tokenAt(pos: number): number {
    const p = this.promptLength;
    return pos < p ? this.spec.ids[pos] : this.generated[pos - p];
  }

  /** Prompt + generated ids at positions from..to-1. */
  tokens(from: number, to: number): number[] {
    return Array.from({ length: to - from }, (_, i) => this.tokenAt(from + i));
  }

  /**
   * Ready to (re)enter the batch: its last tokens are back (a resume needs them all), and a
   * swap-out of its KV has landed.
   */
  get resumable(): boolean {
    return this.inflight === 0 && !(this.swapped && this.hostTokens !== this.hostIssued);
  }

  get active(): boolean {
    return this.state === "prefilling" || this.state === "decoding";
  }

  /**
   * Enters the batch at `slot` with `cached` leading positions already in (shared, cached or
   * swapped-in) KV blocks; the prefill goes on from there.
   */
  admit(slot: number, order: number, cached: number): void {
    this.slot = slot;
    this.admittedAt = order;
    this.computed = cached;
    this.swapped = false; // a swapped request's KV comes back with this admission
    this.state = "prefilling";
  }

  /**
   * Leaves the batch keeping the KV of its newest positions; the first `dropped` are freed and
   * will be computed again when it resumes (the sampler and the kernels give the same KV).
   */
  pauseKeepingNewest(dropped: number): void {
    this.slot = -1;
    this.dropped = dropped;
    this.preemptions++;
    this.state = "paused";
  }

  /** Back in the batch at `slot`: refill the dropped positions, then carry on from its KV. */
  resumeInPlace(slot: number, order: number): void {
    this.slot = slot;
    this.admittedAt = order;
    this.refill = { next: 0, end: this.dropped };
    this.dropped = 0;
    // At least the last position is computed again: its logits pick the next token.
    this.computed = Math.min(this.computed, this.prefillTarget - 1);
    this.state = "prefilling";
  }

  /** Its remaining KV was taken back while it waited: it will be computed again from its ids. */
  forgetKv(): void {
    this.computed = 0;
    this.dropped = 0;
  }

  /**
   * Leaves the batch; its device KV is gone (`swapped`: to the host tier, where it resumes from),
   * its ids and token buffer stay.
   */
  pause(swapped = false): void {
    this.slot = -1;
    this.computed = 0;
    this.dropped = 0;
    this.refill = null;
    this.preemptions++;
    this.swapped = swapped;
    this.state = "paused";
  }

  /** Its prefill has computed every position: from the next step on it decodes. */
  startDecoding(): void {
    this.state = "decoding";
  }

  /**
   * A row of this step computes position `pos`. True when it had computed that position before
   * (its KV was lost meanwhile): the row is a recompute.
   */
  rowAt(pos: number): boolean {
    const again = pos < this.computedHigh;
    this.computedHigh = Math.max(this.computedHigh, pos + 1);
    return again;
  }

  /** This step's rows leave its KV holding its first `end` positions. */
  computeTo(end: number): void {
    this.computed = end;
  }

  /** A sample row of this step is its: one more token on its way back. */
  issueSample(): void {
    this.issued++;
  }

  /**
   * Takes up to `max` of the dropped positions it still has to compute again (after a resume in
   * place), oldest first: positions from..to-1. Once none is left it prefills as usual.
   */
  takeRefill(max: number): { from: number; to: number } {
    const r = this.refill!;
    const from = r.next;
    r.next = Math.min(r.end, r.next + max);
    if (r.next === r.end) this.refill = null;
    return { from, to: r.next };
  }

  /** Its client changed its priority (from the next step on). */
  setPriority(priority: number): void {
    this.priority = priority;
  }

  /** Its client went away or asked: it ends now, and its buffered tokens are dropped. */
  cancel(): void {
    this.cancelled = true;
    this.end("cancelled");
    this.buffer.abort(); // also when generation had finished and the buffer was still playing
  }

  /** Copies out of its first `tokens` positions are on their way to the host tier. */
  hostCopyIssued(tokens: number): void {
    this.hostIssued = tokens;
  }

  /** Copies out issued at host epoch `epoch` have landed (void if its host copy was released since). */
  hostCopyLanded(tokens: number, epoch: number): void {
    if (epoch === this.hostEpoch) this.hostTokens = Math.max(this.hostTokens, tokens);
  }

  /** Its host copy is no longer valid (reuse off): a swap-out copies everything again. */
  restartHostCopy(): void {
    this.hostIssued = 0;
  }

  /** Its host blocks were freed: copies still in flight land in blocks no longer its own. */
  releaseHostCopy(): void {
    this.hostTokens = 0;
    this.hostIssued = 0;
    this.hostEpoch++;
  }

  /** Counts a swap-out of its KV; returns how many there have been, this one included. */
  countSwapOut(): number {
    return ++this.swapsOut;
  }

  /**
   * Takes one sampled token back from the GPU; ends the request on a stop id (its own, or its
   * grammar's) or max tokens.
   */
  accept(rec: SampleRecord): void {
    if (this.finish) return;
    if (this.spec.stopIds.has(rec.id) || this.grammar?.isStop(rec.id)) {
      this.end("stop");
      return;
    }
    this.grammar?.accept(rec.id);
    this.generated.push(rec.id);
    this.buffer.deposit({
      id: rec.id,
      logprob: rec.logprob,
      top: rec.top.slice(0, this.spec.topLogprobs),
      generatedAt: performance.now(),
    });
    if (this.generated.length >= this.spec.maxTokens) this.end("length");
  }

  /**
   * Its grammar has its next mask (or an error): a complete grammar ends the request, a forced
   * token is taken as if sampled (certain: logprob 0), with no step to sample it.
   */
  private grammarMoved(): void {
    const g = this.grammar!;
    if (this.finish) return;
    if (g.error !== null) this.end("error", g.error);
    else if (g.complete) this.end("stop");
    else if (g.forced !== null) {
      this.issued++; // taken as a sample would be, with nothing in flight
      this.accept({ id: g.forced, logprob: 0, top: [] });
    }
  }

  /** Shutdown: drops whatever the reader has not taken yet. */
  cutStream(): void {
    if (this.buffer.finished) return;
    this.streamCut = true;
    this.buffer.abort();
  }

  /**
   * Marks the request finished; idempotent. Normal ends let the buffer drain at pace; a shutdown
   * or a cancel drops what is buffered.
   */
  end(reason: FinishReason, error?: string): void {
    if (this.finish) return;
    this.state = "finished";
    this.grammar?.dispose();
    this.finish = {
      reason,
      promptTokens: this.promptLength,
      completionTokens: this.generated.length,
      error,
    };
    if (reason === "stop" || reason === "length") this.buffer.end();
    else this.buffer.abort();
    this.resolveDone(this.finish);
  }
}
