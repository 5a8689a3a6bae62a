// The runtime's facade, the one thing the server talks to: submit a request and get a handle whose
// tokens arrive through the request's token buffer at the reader's pace; read stats; drain; close.
// A request is validated first (validation.ts); refusals (a full queue, a closing server) are
// decided here, after the scheduler has had a chance to admit it. Output constrained to a grammar
// is compiled first (compileGrammar, grammar/), then submitted with its handle. The parts are put together by
// assembly.ts and read for stats by stats.ts.

import type { EngineInfo, StepEngine } from "../engine/engine.ts";
import { assemble, type Assembly, type RuntimeParts } from "./assembly.ts";
import type { CostTracker } from "./cost_tracker.ts";
import { effectiveTokens } from "./effective_tokens.ts";
import { type CompiledGrammarHandle, Grammars } from "./grammar/grammars.ts";
import { RequestGrammar } from "./grammar/request_grammar.ts";
import type { GrammarSpec } from "./grammar/spec.ts";
import type { RuntimeOptions } from "./options.ts";
import type { PoolingMode } from "../engine/formats/pooling_config.ts";
import type { EconomicsChoice } from "./policy/economics.ts";
import type { PolicyName } from "./policy/index.ts";
import type { OffloadPlanner } from "./plan/offload_planner.ts";
import type { OffloadMode } from "./policy/preset.ts";
import { MAX_PRIORITY, MIN_PRIORITY } from "./policy/priority.ts";
import {
  type FinishInfo,
  type FinishReason,
  Request,
  type RequestSlo,
  type RequestState,
  type TokenEvent,
} from "./request/request.ts";
import { MAX_READING_RATE, MIN_READING_RATE, type PacerStats } from "./request/token_buffer.ts";
import { type RequestStats, type RuntimeStats, runtimeStats } from "./stats.ts";
import {
  checkPriority,
  checkPromptLength,
  InvalidRequest,
  MAX_LOGIT_BIAS_VALUE,
  MAX_PENALTY,
  MAX_REPETITION_PENALTY,
  type SubmitParams,
  validate,
} from "./validation.ts";

export type {
  CompiledGrammarHandle,
  FinishInfo,
  FinishReason,
  GrammarSpec,
  OffloadMode,
  OffloadPlanner,
  PolicyName,
  RequestSlo,
  RequestState,
  RequestStats,
  RuntimeOptions,
  RuntimeParts,
  RuntimeStats,
  SubmitParams,
  TokenEvent,
};
export {
  InvalidRequest,
  MAX_LOGIT_BIAS_VALUE,
  MAX_PENALTY,
  MAX_PRIORITY,
  MAX_READING_RATE,
  MAX_REPETITION_PENALTY,
  MIN_PRIORITY,
  MIN_READING_RATE,
};
// The server renders chat templates and decodes text with the model's tokenizer, and encodes
// prompts through the prompt encoder (large ones off its thread).
export { ChatTemplateError, StreamDecoder, Tokenizer } from "../engine/text/tokenizer.ts";
export type { ChatMessage, ChatToolCall, ChatTools } from "../engine/text/tokenizer.ts";
export { PromptEncoder } from "../engine/text/prompt_encoder.ts";
export type { Prompt } from "../engine/text/prompt.ts";
export { TokenizerClosed } from "../engine/text/tokenizer_thread.ts";

/** A valid request the runtime will not take now (the server answers 429 or 503). */
export class Refused extends Error {
  constructor(
    message: string,
    readonly code: "queue_full" | "shutting_down",
    readonly retryAfterS: number,
  ) {
    super(message);
  }
}

export interface RequestHandle {
  id: number;
  /** The request's tokens, released by its token buffer at its reading rate. */
  tokens: AsyncIterable<TokenEvent>;
  /**
   * How the request ended, once its generation has ended and its token buffer has finished
   * (drained by the reader, or cut): a stream cut at shutdown reads "shutdown" even when its
   * generation had finished.
   */
  done: Promise<FinishInfo>;
  promptTokens: number;
  maxTokens: number;
  /** Cancels the request (idempotent); its stream ends and its KV is freed. */
  cancel(): void;
  /**
   * Changes its priority (an integer in MIN_PRIORITY..MAX_PRIORITY; throws InvalidRequest
   * otherwise) from the next step on. False, with nothing changed, once its generation has ended.
   */
  setPriority(priority: number): boolean;
  bufferStats(): PacerStats;
}

/** An embedding request samples nothing; its slot's sampling parameters are these. */
const NO_SAMPLING = { temperature: 0, topK: 0, topP: 1, seed: 0 };

export class Runtime {
  private readonly parts: Assembly;
  private nextId = 1;
  private closing = false;
  /** Effective tokens of the requests that have ended, added as each ends. */
  private effectiveTokens = 0;
  /** Requests whose token buffer may still be playing out (pruned as they finish). */
  private readonly streams = new Set<Request>();
  private readonly grammars: Grammars;

  /**
   * `parts`: what the caller makes itself (an offload planner of its own, or where OrbitFlow's
   * plans come from), for the options'.
   */
  constructor(
    private readonly engine: StepEngine,
    options: RuntimeOptions,
    parts: RuntimeParts = {},
  ) {
    this.parts = assemble(engine, options, parts);
    const { vocabulary, eosIds } = options;
    this.grammars = new Grammars(
      vocabulary ? { vocabulary, vocabSize: engine.info.vocabSize, stopIds: eosIds } : null,
    );
  }

  /** The engine's limits, with the context a request may have once the prefetch region is set aside. */
  get info(): EngineInfo {
    return this.parts.info;
  }

  /** The scheduling preset, `--sched auto` resolved. */
  get policy(): PolicyName {
    return this.settings.policy;
  }

  /** What `--sched auto` chose and why (null when a preset was named). */
  get economics(): EconomicsChoice | null {
    return this.parts.economics;
  }

  /** The options it runs with, `--sched auto` resolved. */
  get settings(): Readonly<RuntimeOptions & { policy: PolicyName }> {
    return this.parts.options;
  }

  /** The engine's cost model, re-fitted from observed step times (for planners and reports). */
  get costs(): CostTracker {
    return this.parts.costs;
  }

  /**
   * Compiles a grammar for SubmitParams.grammar (cached by spec). Rejects with InvalidRequest
   * (param "response_format", code "invalid_grammar") when it does not compile.
   */
  compileGrammar(spec: GrammarSpec): Promise<CompiledGrammarHandle> {
    return this.grammars.compile(spec);
  }

  /** Validates and queues a request. Throws InvalidRequest or Refused, synchronously. */
  submit(params: SubmitParams): RequestHandle {
    return this.enqueue(params).handle;
  }

  /** submit(), keeping the request itself for the runtime's own reading (pool()). */
  private enqueue(params: SubmitParams): { req: Request; handle: RequestHandle } {
    if (this.closing) throw new Refused("Server is shutting down", "shutting_down", 0);
    const { info, settings: options } = this;
    const spec = validate(params, info, info.maxContext, options);
    const compiled = params.grammar;
    if (compiled && compiled.owner !== this.grammars) {
      throw new InvalidRequest(
        "The grammar was compiled by another runtime",
        "response_format",
        "invalid_grammar",
      );
    }
    const grammar = compiled
      ? new RequestGrammar(this.grammars.matcher(compiled), this.grammars.stopIds)
      : null;
    const req = new Request(this.nextId++, spec, performance.now(), grammar);
    // Its masks come between steps: the loop may be asleep waiting for one.
    grammar?.listen(() => this.parts.loop.kick());
    // Admission first: the queue bound counts only what must really wait.
    const admitted = this.parts.scheduler.submit(req);
    if (admitted === "queued" && this.parts.scheduler.waiting.length > options.maxQueue) {
      this.parts.scheduler.withdraw(req);
      grammar?.dispose();
      throw new Refused("Server is at capacity; retry shortly", "queue_full", 1);
    }
    const cancel = () => {
      req.cancel();
      this.parts.loop.kick();
    };
    if (params.signal?.aborted) cancel();
    params.signal?.addEventListener("abort", cancel, { once: true });
    this.parts.loop.kick();
    for (const r of this.streams) if (r.buffer.finished) this.streams.delete(r);
    this.streams.add(req);
    // The request's end: generation over and its buffer drained (or cut). Its tokens' weights
    // need the output length, known only now.
    const ended = Promise.all([req.done, req.buffer.closed]);
    ended.then(() => {
      this.effectiveTokens += effectiveTokens(
        req.buffer.occupancyAtDeposits(),
        req.generated.length,
      );
    });
    const handle: RequestHandle = {
      id: req.id,
      tokens: req.buffer,
      done: ended.then(([f]) => req.streamCut ? { ...f, reason: "shutdown" as const } : f),
      promptTokens: req.promptLength,
      maxTokens: spec.maxTokens,
      cancel,
      setPriority: (priority) => {
        checkPriority(priority);
        if (req.finish) return false;
        req.setPriority(priority);
        // A pause or an admission it makes possible need not wait for a step.
        this.parts.loop.kick();
        return true;
      },
      bufferStats: () => req.buffer.stats(),
    };
    return { req, handle };
  }

  /**
   * Runs `ids` as an embedding request (a prefill through the same batches, its KV freed at the
   * end) and resolves with its hidden states, final-normed and pooled by `pooling` (mean: their
   * mean), not L2-normalised. Rejects with InvalidRequest or Refused where submit would throw
   * them, and with an Error when the request ends otherwise (cancelled by `signal`, a failed
   * step, shutdown).
   */
  async pool(ids: number[], pooling: PoolingMode, signal?: AbortSignal): Promise<Float32Array> {
    const { req, handle } = this.enqueue({ ids, pooling, sampling: NO_SAMPLING, signal });
    // It yields no tokens; reading its stream to the end lets its buffer close.
    for await (const _ of handle.tokens) { /* none */ }
    const done = await handle.done;
    if (done.reason !== "stop") {
      throw new Error(
        `embedding request ended: ${done.reason}${done.error ? `: ${done.error}` : ""}`,
      );
    }
    return req.pooled!.vector();
  }

  /**
   * Refuses, as submit would (InvalidRequest), a prompt known to be at least `atLeast` tokens that
   * cannot fit the context (validation.ts, checkPromptLength).
   */
  checkPromptLength(atLeast: number): void {
    checkPromptLength(atLeast, this.info.maxContext);
  }

  stats(): RuntimeStats {
    const layerwise = this.settings.layerwisePrefill ?? false;
    return runtimeStats(this.parts, this.streams, this.effectiveTokens, layerwise);
  }

  /** Step durations (ms) since the last call, for the metrics histogram. */
  takeStepTimes(): number[] {
    return this.parts.loop.takeStepTimes();
  }

  /** The offload planner's solve times (ms) since the last call, for the metrics histogram. */
  takeSolveTimes(): number[] {
    return this.parts.space.planner?.takeSolveTimes() ?? [];
  }

  /** Requests not yet finished (running or waiting). */
  get openRequests(): number {
    return this.parts.scheduler.running.length + this.parts.scheduler.waiting.length;
  }

  /** Refuses new work from now on; running requests go on. */
  drain(): void {
    this.closing = true;
  }

  /**
   * Ends every request ("shutdown") and cuts every stream still playing out, waits for the loop,
   * and closes the engine.
   */
  async close(): Promise<void> {
    this.closing = true;
    // Its Worker first, whatever happens below; the last steps keep the last plan's distances.
    this.parts.space.planner?.close();
    for (const req of [...this.parts.scheduler.waiting, ...this.parts.scheduler.running]) {
      req.end("shutdown");
    }
    for (const req of this.streams) req.cutStream();
    this.streams.clear();
    await this.parts.loop.stop();
    await this.grammars.close();
    await this.engine.close();
  }
}
