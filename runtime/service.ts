// The runtime's facade, the one thing the server talks to: submit a request and get a handle whose
// tokens arrive through the request's token buffer at the reader's pace; read stats; close.
// Every limit on a request is checked here, once; refusals (a full queue, a closing server) are
// decided here too, after the scheduler has had a chance to admit the request.

import type { EngineInfo, SamplingParams, StepEngine } from "../engine/engine.ts";
import { BlockPool } from "./kv/block_pool.ts";
import { blocksPerLayer } from "../engine/kv/pool_shape.ts";
import { PrefixIndex, type PrefixStats } from "./kv/prefix_index.ts";
import { StepLoop } from "./loop.ts";
import { CostTracker } from "./cost_tracker.ts";
import { effectiveTokens } from "./effective_tokens.ts";
import { choosePreset, type PolicyName } from "./policy/index.ts";
import type { OffloadDistanceOf, OffloadMode, PresetOptions } from "./policy/preset.ts";
import { MAX_PRIORITY, MIN_PRIORITY } from "./policy/priority.ts";
import {
  type FinishInfo,
  type FinishReason,
  Request,
  type RequestSlo,
  type RequestState,
  type TokenEvent,
} from "./request/request.ts";
import { Scheduler } from "./scheduler.ts";
import { Placement } from "./placement.ts";
import { PrefixCache } from "./prefix_cache.ts";
import { HostTier } from "./kv/host_tier.ts";
import { Swapper, type SwapStats } from "./kv/swap.ts";
import { PrefixTier } from "./kv/prefix_tier.ts";
import { Offloader, type OffloadStats } from "./kv/offload.ts";
import { OrbitOffload, type PlannerStats } from "./plan/orbit_offload.ts";
import {
  MAX_READING_RATE,
  MIN_READING_RATE,
  type PacerOccupancy,
  type PacerStats,
} from "./request/token_buffer.ts";

export type { FinishInfo, FinishReason, PolicyName, RequestSlo, RequestState, TokenEvent };
export { MAX_PRIORITY, MAX_READING_RATE, MIN_PRIORITY, MIN_READING_RATE };
// The server renders chat templates and decodes text with the model's tokenizer.
export { ChatTemplateError, StreamDecoder, Tokenizer } from "../engine/model/tokenizer.ts";

/** The runtime's options: its preset's (policy/preset.ts), and its own. */
export interface RuntimeOptions extends PresetOptions {
  /** Scheduling preset (`--sched`). */
  policy: PolicyName;
  /**
   * Share cached KV blocks between requests with the same leading tokens (`--prefix-cache`). With
   * a host tier, blocks the device evicts move there and come back on a hit.
   */
  prefixCache?: boolean;
  /** Mirror new full KV blocks to the host tier as they are made (`--write-through`). */
  writeThrough?: boolean;
  /** Keep host copies valid after a swap-in, so swapping out again moves only new KV. */
  swapReuse?: boolean;
  /** Most requests waiting for admission; a request that would be one more is refused. */
  maxQueue: number;
  /** Largest max_tokens a request may ask for. */
  maxTokensLimit: number;
  /** Reading rate for requests that give none (tokens/s); 0 or undefined = unpaced. */
  defaultReadingRate?: number;
  /** SLO targets for requests that give none. */
  defaultSlo?: RequestSlo;
  /** Token ids that end generation unless a request gives its own. */
  eosIds: readonly number[];
}

export type { OffloadDistanceOf, OffloadMode };

export interface SubmitParams {
  ids: number[];
  /** Omitted: as many as the context allows, capped by `maxTokensDefault` and the limit. */
  maxTokens?: number;
  maxTokensDefault?: number;
  sampling: SamplingParams;
  topLogprobs?: number;
  /** Token ids that end generation; default the model's EOS ids; [] never stops early. */
  stopIds?: number[];
  readingRate?: number;
  slo?: RequestSlo;
  /** An integer in MIN_PRIORITY..MAX_PRIORITY; lower runs first (default 0). */
  priority?: number;
  /** Aborting it cancels the request; its blocks are freed at the next step boundary. */
  signal?: AbortSignal;
}

/** A request the runtime will never run as given (the server answers 400). */
export class InvalidRequest extends Error {
  constructor(message: string, readonly param: string | null, readonly code: string) {
    super(message);
  }
}

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

export interface RequestStats {
  id: number;
  state: RequestState;
  generated: number;
  preemptions: number;
  priority: number;
  /** Tokens deposited in its buffer and not yet taken by the reader, and their playout seconds. */
  buffered: PacerOccupancy;
}

export interface RuntimeStats {
  waiting: number;
  /** Requests preempted (their KV freed or moved) that wait to resume; their streams play on. */
  paused: number;
  running: number;
  /** Device blocks held by requests. */
  kvBlocksUsed: number;
  /** Device blocks the prefix cache keeps that no request holds (evicted before anyone waits). */
  kvBlocksCached: number;
  kvBlocksTotal: number;
  /** Host tier blocks holding some request's KV, and the tier's size (0 without one). */
  hostBlocksUsed: number;
  hostBlocksTotal: number;
  /** Host tier blocks the prefix cache keeps that no request holds (evicted before anyone waits). */
  hostBlocksCached: number;
  swaps: SwapStats | null;
  /** Offload distance work (null without offloading). */
  offload: OffloadStats | null;
  /** The offload planner's solves (only with `offload: "orbit"`). */
  planner?: PlannerStats;
  /** KV bytes copied to the host (swap-outs, write-through) and back. */
  kvBytesMoved: { out: number; in: number };
  prefix: PrefixStats | null;
  steps: number;
  tokensGenerated: number;
  preemptions: number;
  /** Preempted requests resumed by computing only their dropped oldest KV again (eLLM). */
  partialResumes: number;
  /** Running requests paused by the policy or the offload planner, not for want of a block. */
  policyPauses: number;
  /**
   * Requests admitted by layer-wise prefill (some layers offloaded) as their full KV did not fit;
   * only with `layerwisePrefill`.
   */
  layerwiseAdmissions?: number;
  /**
   * Preemptions by what became of the victim's KV (with `recompute: "auto"`, the cost model's
   * choice): swapped to the host, its oldest blocks dropped, or all dropped. They add up to
   * `preemptions`.
   */
  preemptChoices: { swap: number; dropOldest: number; dropAll: number };
  /** Prefill rows of positions their request had computed before (KV lost to a preemption). */
  recomputedTokens: number;
  /**
   * TokenFlow's effective tokens of the requests that have ended (runtime/effective_tokens.ts):
   * each token weighed by its buffer's occupancy when it was deposited.
   */
  effectiveTokens: number;
  requests: RequestStats[];
}

export class Runtime {
  private readonly scheduler: Scheduler;
  private readonly pool: BlockPool;
  private readonly prefixIndex: PrefixIndex | null;
  private readonly hostTier: HostTier | null;
  private readonly swapper: Swapper | null;
  private readonly prefixTier: PrefixTier | null;
  private readonly offloader: Offloader | null;
  private readonly planner: OrbitOffload | null;
  /** The engine's cost model, re-fitted from observed step times (for planners and reports). */
  readonly costs: CostTracker;
  private readonly loop: StepLoop;
  private nextId = 1;
  private closing = false;
  /** Effective tokens of the requests that have ended, added as each ends. */
  private effectiveTokens = 0;
  /** Requests whose token buffer may still be playing out (pruned as they finish). */
  private readonly streams = new Set<Request>();
  private readonly limits: EngineInfo;

  constructor(private readonly engine: StepEngine, private readonly options: RuntimeOptions) {
    const info = engine.info;
    this.pool = new BlockPool(info);
    this.prefixIndex = options.prefixCache ? new PrefixIndex(this.pool) : null;
    const preset = choosePreset(options.policy, options, {
      hostTier: info.hostBlocks > 0,
      costModel: info.costModel !== undefined,
    });
    const { offload: mode, distance, layerwisePrefill } = preset.placing;
    this.hostTier = info.hostBlocks > 0 ? new HostTier(this.pool, info.hostBlocks) : null;
    this.offloader = preset.placing.offloads || layerwisePrefill
      ? new Offloader(
        this.pool,
        this.hostTier!,
        preset.placing.prefetchBlocks ?? Math.ceil(this.pool.total / info.numLayers),
      )
      : null;
    this.planner = mode === "orbit"
      ? new OrbitOffload({
        info,
        pool: this.pool,
        region: this.offloader!,
        // Read at each re-plan: `costs` is set below, and re-fitted every step.
        costs: () => this.costs.current,
      })
      : null;
    this.swapper = this.hostTier ? new Swapper(this.hostTier, options.swapReuse ?? true) : null;
    this.prefixTier = this.prefixIndex && this.hostTier
      ? new PrefixTier(this.prefixIndex, this.hostTier)
      : null;
    const prefixCache = this.prefixIndex ? new PrefixCache(this.prefixIndex, this.pool) : null;
    this.scheduler = new Scheduler({
      pool: this.pool,
      limits: info,
      policy: preset.policy,
      preempt: preset.preempt,
      prefixCache,
      host: this.hostTier && this.swapper
        ? {
          tier: this.hostTier,
          swaps: this.swapper,
          // Four blocks per request per step: small copies beside each step, not one big stall.
          writeThroughBlocks: options.writeThrough ? 4 : 0,
        }
        : null,
      placement: this.offloader
        ? new Placement(this.pool, this.offloader, info.maxRows, {
          distance: typeof distance === "function"
            ? (req) => distance({ id: req.id, generated: req.generated.length })
            : distance > 0
            ? () => distance
            : undefined,
          planner: this.planner ?? undefined,
          layerwisePrefill,
        }, prefixCache)
        : null,
      // Read lazily: `costs` is set below, and re-fitted every step.
      costModel: () => this.costs.current,
      kvBlockBytes: info.kvBlockBytes,
    });
    this.limits = { ...info, maxContext: this.contextLimit(info) };
    this.costs = new CostTracker(info.costModel, info.kvBlockBytes);
    this.loop = new StepLoop(
      engine,
      this.scheduler,
      info.ringSize,
      undefined,
      (step, ms) => {
        this.costs.observe(step, ms);
        this.planner?.observeStep(step, ms); // drift of measured steps from the plan's prediction
      },
    );
  }

  /** The engine's limits, with the context a request may have once the prefetch region is set aside. */
  get info(): EngineInfo {
    return this.limits;
  }

  get policy(): PolicyName {
    return this.options.policy;
  }

  /** Validates and queues a request. Throws InvalidRequest or Refused, synchronously. */
  submit(params: SubmitParams): RequestHandle {
    if (this.closing) throw new Refused("Server is shutting down", "shutting_down", 0);
    const spec = this.validate(params);
    const req = new Request(this.nextId++, spec, performance.now());
    // Admission first: the queue bound counts only what must really wait.
    const admitted = this.scheduler.submit(req);
    if (admitted === "queued" && this.scheduler.queued > this.options.maxQueue) {
      this.scheduler.withdraw(req);
      throw new Refused("Server is at capacity; retry shortly", "queue_full", 1);
    }
    const cancel = () => {
      req.cancel();
      this.loop.kick();
    };
    if (params.signal?.aborted) cancel();
    params.signal?.addEventListener("abort", cancel, { once: true });
    this.loop.kick();
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
    return {
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
        this.loop.kick(); // a pause or an admission it makes possible need not wait for a step
        return true;
      },
      bufferStats: () => req.buffer.stats(),
    };
  }

  stats(): RuntimeStats {
    // Requests still generating, then finished ones whose buffers are still playing out.
    const live = new Set([...this.scheduler.running, ...this.scheduler.waiting]);
    const playing = [...this.streams].filter((r) => !live.has(r) && !r.buffer.finished);
    const all = [...live, ...playing];
    return {
      waiting: this.scheduler.waiting.filter((r) => r.state === "waiting").length,
      paused: this.scheduler.waiting.filter((r) => r.state === "paused").length,
      running: this.scheduler.running.length,
      kvBlocksUsed: this.pool.used - this.pool.idle - (this.offloader?.regionTotal ?? 0),
      kvBlocksCached: this.pool.idle,
      kvBlocksTotal: this.pool.total,
      hostBlocksUsed: this.hostTier ? this.hostTier.pool.used - this.hostTier.pool.idle : 0,
      hostBlocksTotal: this.hostTier?.pool.total ?? 0,
      hostBlocksCached: this.hostTier?.pool.idle ?? 0,
      swaps: this.swapper ? { ...this.swapper.stats } : null,
      offload: this.offloader ? { ...this.offloader.stats } : null,
      ...(this.planner ? { planner: this.planner.stats() } : {}),
      kvBytesMoved: this.kvBytesMoved(),
      prefix: this.prefixIndex?.stats() ?? null,
      steps: this.loop.steps,
      tokensGenerated: this.loop.tokens,
      preemptions: this.scheduler.preemptions,
      partialResumes: this.scheduler.partialResumes,
      policyPauses: this.scheduler.policyPauses,
      ...(this.options.layerwisePrefill
        ? { layerwiseAdmissions: this.scheduler.layerwiseAdmissions }
        : {}),
      preemptChoices: { ...this.scheduler.preemptChoices },
      recomputedTokens: this.scheduler.recomputedTokens,
      effectiveTokens: this.effectiveTokens,
      requests: all.map((r) => ({
        id: r.id,
        state: r.state,
        generated: r.generated.length,
        preemptions: r.preemptions,
        priority: r.priority,
        buffered: r.buffer.occupancy(),
      })),
    };
  }

  /**
   * The engine's context limit, less what the prefetch region takes from the pool: a request
   * alone must fit with every layer on the device, or it could wait forever.
   */
  private contextLimit(info: EngineInfo): number {
    const region = this.offloader?.regionBlocks ?? 0;
    if (region === 0) return info.maxContext;
    const perLayer = blocksPerLayer(info, info.blocksPerArena.map((n) => n - region));
    return Math.max(0, Math.min(info.maxContext, perLayer * info.blockSize));
  }

  private kvBytesMoved(): { out: number; in: number } {
    const sw = this.swapper?.stats;
    const bytes = this.engine.info.kvBlockBytes;
    if (!sw) return { out: 0, in: 0 };
    const off = this.offloader?.stats;
    const cache = this.prefixTier?.stats;
    const out = sw.blocksOut + sw.blocksWrittenThrough + (off?.blocksOut ?? 0) +
      (cache?.blocksOut ?? 0);
    const into = sw.blocksIn + (off ? off.blocksPrefetched + off.blocksRestored : 0) +
      (cache?.blocksIn ?? 0);
    return { out: out * bytes, in: into * bytes };
  }

  /** Step durations (ms) since the last call, for the metrics histogram. */
  takeStepTimes(): number[] {
    return this.loop.takeStepTimes();
  }

  /** The offload planner's solve times (ms) since the last call, for the metrics histogram. */
  takeSolveTimes(): number[] {
    return this.planner?.takeSolveTimes() ?? [];
  }

  /** Requests not yet finished (running or waiting). */
  get openRequests(): number {
    return this.scheduler.running.length + this.scheduler.waiting.length;
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
    this.planner?.close();
    for (const req of [...this.scheduler.waiting, ...this.scheduler.running]) req.end("shutdown");
    for (const req of this.streams) req.cutStream();
    this.streams.clear();
    await this.loop.stop();
    await this.engine.close();
  }

  private validate(p: SubmitParams) {
    const info = this.engine.info;
    const context = this.limits.maxContext;
    if (p.ids.length === 0) {
      throw new InvalidRequest("The prompt is empty", "prompt", "invalid_value");
    }
    const bad = p.ids.find((id) => !Number.isInteger(id) || id < 0 || id >= info.vocabSize);
    if (bad !== undefined) {
      throw new InvalidRequest(
        `Token id ${bad} is outside the vocabulary (0..${info.vocabSize - 1})`,
        "prompt",
        "invalid_value",
      );
    }
    if (p.ids.length >= context) {
      throw new InvalidRequest(
        `The prompt is ${p.ids.length} tokens; this model's context is ${context} tokens`,
        "messages",
        "context_length_exceeded",
      );
    }
    const limit = this.options.maxTokensLimit;
    const room = context - p.ids.length;
    if (p.maxTokens !== undefined) {
      if (!Number.isInteger(p.maxTokens) || p.maxTokens < 0) {
        throw new InvalidRequest(
          "max_tokens must be a non-negative integer",
          "max_tokens",
          "invalid_value",
        );
      }
      if (p.maxTokens > limit) {
        throw new InvalidRequest(
          `max_tokens is ${p.maxTokens}; the limit is ${limit}`,
          "max_tokens",
          "invalid_value",
        );
      }
      if (p.maxTokens > room) {
        throw new InvalidRequest(
          `The prompt (${p.ids.length} tokens) plus max_tokens (${p.maxTokens}) exceeds the context of ${context} tokens`,
          "max_tokens",
          "context_length_exceeded",
        );
      }
    }
    const maxTokens = p.maxTokens ?? Math.min(room, limit, p.maxTokensDefault ?? Infinity);
    const topLogprobs = p.topLogprobs ?? 0;
    if (!Number.isInteger(topLogprobs) || topLogprobs < 0 || topLogprobs > info.maxTopLogprobs) {
      throw new InvalidRequest(
        `top_logprobs is at most ${info.maxTopLogprobs}`,
        "top_logprobs",
        "invalid_value",
      );
    }
    const readingRate = p.readingRate ?? this.options.defaultReadingRate ?? 0;
    if (
      readingRate !== 0 && !(readingRate >= MIN_READING_RATE && readingRate <= MAX_READING_RATE)
    ) {
      throw new InvalidRequest(
        `reading_rate must be between ${MIN_READING_RATE} and ${MAX_READING_RATE} tokens/s`,
        "reading_rate",
        "invalid_value",
      );
    }
    if (p.priority !== undefined) checkPriority(p.priority);
    return {
      ids: p.ids,
      maxTokens,
      sampling: p.sampling,
      topLogprobs,
      stopIds: new Set(p.stopIds ?? this.options.eosIds),
      readingRate,
      slo: { ...definedOnly(this.options.defaultSlo), ...definedOnly(p.slo) },
      priority: p.priority,
    };
  }
}

function checkPriority(priority: number): void {
  if (!Number.isInteger(priority) || priority < MIN_PRIORITY || priority > MAX_PRIORITY) {
    throw new InvalidRequest(
      `priority must be an integer between ${MIN_PRIORITY} and ${MAX_PRIORITY}`,
      "priority",
      "invalid_value",
    );
  }
}

/** The fields of `o` that are not undefined (so they do not hide defaults when spread). */
function definedOnly<T extends object>(o: T | undefined): Partial<T> {
  return Object.fromEntries(Object.entries(o ?? {}).filter(([, v]) => v !== undefined)) as Partial<
    T
  >;
}
