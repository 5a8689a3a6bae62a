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
// copy. (What the prefix cache holds for it is the cache's: runtime/prefix_cache.ts.) Outside this
// file they are `readonly`, so the type checker refuses any other write; the methods write through
// `Writable`, a view of the same object (a cast: nothing at run time).
//
// A constrained request carries its grammar (grammar/request_grammar.ts), which every delivered
// token advances; the grammar, not a step, may end it (complete) or hand it a token (forced).

import type { SampleRecord, SamplingParams } from "../../engine/engine.ts";
import type { RequestGrammar } from "../grammar/request_grammar.ts";
import { TokenPacer } from "./token_buffer.ts";
import type { PoolingMode } from "../../engine/formats/pooling_config.ts";
import { PooledHidden } from "./pooled_hidden.ts";

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
  /** false: it never speculates (runtime/speculative/), whatever the server's `--speculative`. */
  speculate?: boolean;
  /**
   * An embedding request: its prompt's hidden states pooled so (pooled_hidden.ts), nothing sampled
   * (maxTokens 0); it ends ("stop") once the pooled rows are read.
   */
  pooling?: PoolingMode;
}

/** A request as its own methods write it: the same object, every field writable. */
type Writable = { -readonly [K in keyof Request]: Request[K] };

export class Request {
  readonly state: RequestState = "waiting";
  /** Batch row while admitted (prefilling or decoding), else -1. */
  readonly slot: number = -1;
  /** Generated ids delivered so far, in order (the stop token is not one of them). */
  readonly generated: readonly number[] = [];
  /** Positions whose KV is on the device in the current residency (0 after a preemption). */
  readonly computed: number = 0;
  /** High-water mark of positions it has computed (any residency): rows below it are recomputes. */
  readonly computedHigh: number = 0;
  /** Samples submitted to the GPU over the request's life (delivered + in flight). */
  readonly issued: number = 0;
  /** Times its KV was freed to make room for another request. */
  readonly preemptions: number = 0;
  /** Leading positions whose KV has landed in the host tier (see runtime/kv/host_tier.ts). */
  readonly hostTokens: number = 0;
  /** Leading positions whose KV is on the host once the copies in flight land. */
  readonly hostIssued: number = 0;
  /** Bumped when its host blocks are released, so copies issued before can no longer land. */
  readonly hostEpoch: number = 0;
  /** Paused with its KV in the host tier: it resumes by swapping in, not by recomputing. */
  readonly swapped: boolean = false;
  /** Times its KV was swapped out. */
  readonly swapsOut: number = 0;
  /** Paused holding its newest blocks: its first `dropped` positions' KV was freed. */
  readonly dropped: number = 0;
  /** After such a resume: the dropped positions still to compute again, before anything else. */
  readonly refill: Readonly<{ next: number; end: number }> | null = null;
  /** Order of (re)admission; the most recent is preempted first. */
  readonly admittedAt: number = -1;
  /** Lower runs first (runtime/policy/priority.ts); its client may change it while it runs. */
  readonly priority: number;
  readonly cancelled: boolean = false;
  readonly finish: Readonly<FinishInfo> | null = null;
  /** True when shutdown dropped tokens its reader had not yet taken. */
  readonly streamCut: boolean = false;
  readonly buffer: TokenPacer<TokenEvent>;
  /** An embedding request's pooled rows (spec.pooling), else null. */
  readonly pooled: PooledHidden | null;
  readonly done: Promise<FinishInfo>;
  #resolveDone!: (f: FinishInfo) => void;

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
    this.pooled = spec.pooling ? new PooledHidden(spec.pooling, spec.ids.length) : null;
    this.buffer = new TokenPacer({ rate: spec.readingRate });
    this.done = new Promise((r) => this.#resolveDone = r);
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

  /** Rows its prefill still has to run: dropped positions to compute again, then the rest (0
   * unless it is prefilling). */
  get prefillRowsLeft(): number {
    if (this.state !== "prefilling") return 0;
    const refill = this.refill ? this.refill.end - this.refill.next : 0;
    return refill + this.prefillTarget - this.computed;
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
    const self = this as Writable;
    self.slot = slot;
    self.admittedAt = order;
    self.computed = cached;
    self.swapped = false; // a swapped request's KV comes back with this admission
    self.state = "prefilling";
  }

  /**
   * Leaves the batch keeping the KV of its newest positions; the first `dropped` are freed and
   * will be computed again when it resumes (the sampler and the kernels give the same KV).
   */
  pauseKeepingNewest(dropped: number): void {
    const self = this as Writable;
    self.slot = -1;
    self.dropped = dropped;
    self.preemptions++;
    self.state = "paused";
  }

  /** Back in the batch at `slot`: refill the dropped positions, then carry on from its KV. */
  resumeInPlace(slot: number, order: number): void {
    const self = this as Writable;
    self.slot = slot;
    self.admittedAt = order;
    self.refill = { next: 0, end: this.dropped };
    self.dropped = 0;
    // At least the last position is computed again: its logits pick the next token.
    self.computed = Math.min(self.computed, this.prefillTarget - 1);
    self.state = "prefilling";
  }

  /** Its remaining KV was taken back while it waited: it will be computed again from its ids. */
  forgetKv(): void {
    const self = this as Writable;
    self.computed = 0;
    self.dropped = 0;
  }

  /**
   * Leaves the batch; its device KV is gone (`swapped`: to the host tier, where it resumes from),
   * its ids and token buffer stay.
   */
  pause(swapped = false): void {
    const self = this as Writable;
    self.slot = -1;
    self.computed = 0;
    self.dropped = 0;
    self.refill = null;
    self.preemptions++;
    self.swapped = swapped;
    self.state = "paused";
  }

  /** Its prefill has computed every position: from the next step on it decodes. */
  startDecoding(): void {
    const self = this as Writable;
    self.state = "decoding";
  }

  /**
   * A row of this step computes position `pos`. True when it had computed that position before
   * (its KV was lost meanwhile): the row is a recompute.
   */
  rowAt(pos: number): boolean {
    const self = this as Writable;
    const again = pos < this.computedHigh;
    self.computedHigh = Math.max(self.computedHigh, pos + 1);
    return again;
  }

  /** This step's rows leave its KV holding its first `end` positions. */
  computeTo(end: number): void {
    const self = this as Writable;
    self.computed = end;
  }

  /** A sample row of this step is its: one more token on its way back. */
  issueSample(): void {
    const self = this as Writable;
    self.issued++;
  }

  /**
   * A speculated run from `pos` came back (runtime/speculative/verify.ts): `unused` of its samples
   * were not taken, and, if it still holds that step's KV, its `accepted` drafts' positions after
   * `pos` are computed (the rows of rejected ones wrote KV past `computed`, to be overwritten).
   */
  settleDrafts(pos: number, accepted: number, unused: number): void {
    const self = this as Writable;
    self.issued -= unused;
    if (this.state !== "decoding" || this.computed !== pos + 1) return;
    self.computed = pos + 1 + accepted;
    self.computedHigh = Math.max(this.computedHigh, this.computed);
  }

  /**
   * Takes up to `max` of the dropped positions it still has to compute again (after a resume in
   * place), oldest first: positions from..to-1. Once none is left it prefills as usual.
   */
  takeRefill(max: number): { from: number; to: number } {
    const self = this as Writable;
    const { next: from, end } = this.refill!;
    const to = Math.min(end, from + max);
    self.refill = to === end ? null : { next: to, end };
    return { from, to };
  }

  /** Its client changed its priority (from the next step on). */
  setPriority(priority: number): void {
    const self = this as Writable;
    self.priority = priority;
  }

  /** Its client went away or asked: it ends now, and its buffered tokens are dropped. */
  cancel(): void {
    const self = this as Writable;
    self.cancelled = true;
    this.end("cancelled");
    this.buffer.abort(); // also when generation had finished and the buffer was still playing
  }

  /** Copies out of its first `tokens` positions are on their way to the host tier. */
  hostCopyIssued(tokens: number): void {
    const self = this as Writable;
    self.hostIssued = tokens;
  }

  /** Copies out issued at host epoch `epoch` have landed (void if its host copy was released since). */
  hostCopyLanded(tokens: number, epoch: number): void {
    const self = this as Writable;
    if (epoch === this.hostEpoch) self.hostTokens = Math.max(self.hostTokens, tokens);
  }

  /** Its host copy is no longer valid (reuse off): a swap-out copies everything again. */
  restartHostCopy(): void {
    const self = this as Writable;
    self.hostIssued = 0;
  }

  /** Its host blocks were freed: copies still in flight land in blocks no longer its own. */
  releaseHostCopy(): void {
    const self = this as Writable;
    self.hostTokens = 0;
    self.hostIssued = 0;
    self.hostEpoch++;
  }

  /** Counts a swap-out of its KV; returns how many there have been, this one included. */
  countSwapOut(): number {
    const self = this as Writable;
    return ++self.swapsOut;
  }

  /**
   * Takes one sampled token back from the GPU; ends the request on a stop id (its own, or its
   * grammar's) or max tokens.
   */
  /** A pooled read of its rows came back; the last one ends it. */
  acceptHidden(vector: Float32Array): void {
    if (this.finish) return;
    if (this.pooled!.add(vector)) this.end("stop");
  }

  accept(rec: SampleRecord): void {
    const self = this as Writable;
    if (this.finish) return;
    if (this.spec.stopIds.has(rec.id) || this.grammar?.isStop(rec.id)) {
      this.end("stop");
      return;
    }
    this.grammar?.accept(rec.id);
    (self.generated as number[]).push(rec.id); // its own array: read-only to others
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
    const self = this as Writable;
    const g = this.grammar!;
    if (this.finish) return;
    if (g.error !== null) this.end("error", g.error);
    else if (g.complete) this.end("stop");
    else if (g.forced !== null) {
      self.issued++; // taken as a sample would be, with nothing in flight
      this.accept({ id: g.forced, logprob: 0, top: [] });
    }
  }

  /** Shutdown: drops whatever the reader has not taken yet. */
  cutStream(): void {
    const self = this as Writable;
    if (this.buffer.finished) return;
    self.streamCut = true;
    this.buffer.abort();
  }

  /**
   * Marks the request finished; idempotent. Normal ends let the buffer drain at pace; a shutdown
   * or a cancel drops what is buffered.
   */
  end(reason: FinishReason, error?: string): void {
    const self = this as Writable;
    if (this.finish) return;
    self.state = "finished";
    this.grammar?.dispose();
    const finish = {
      reason,
      promptTokens: this.promptLength,
      completionTokens: this.generated.length,
      error,
    };
    self.finish = finish;
    if (reason === "stop" || reason === "length") this.buffer.end();
    else this.buffer.abort();
    this.#resolveDone(finish);
  }
}
