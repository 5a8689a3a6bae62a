// Every limit on a request, checked once, before it is queued: its prompt (not empty, in the
// vocabulary, shorter than the context), max_tokens (within the limit and the room the prompt
// leaves), top_logprobs, the sampling controls, reading rate and priority. What it does not give comes from the
// runtime's defaults. A request that fails is refused with InvalidRequest (the server answers 400).

import type { EngineInfo, SamplingParams } from "../engine/engine.ts";
import type { PoolingMode } from "../engine/formats/pooling_config.ts";
import { MAX_LOGIT_BIAS } from "../engine/gpu/kernels/logit_controls.ts";
import type { CompiledGrammarHandle } from "./grammar/grammars.ts";
import { InvalidRequest } from "./errors/invalid_request.ts";
import type { RuntimeOptions } from "./options.ts";
import { MAX_PRIORITY, MIN_PRIORITY } from "./policy/priority.ts";
import type { RequestSlo, RequestSpec } from "./request/request.ts";
import { MAX_READING_RATE, MIN_READING_RATE } from "./request/token_buffer.ts";

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
  /** Constrains the output (Runtime.compileGrammar); it ends with "stop" once the grammar is complete. */
  grammar?: CompiledGrammarHandle;
  /**
   * An embedding request (Runtime.pool): the prompt's hidden states pooled so, nothing generated
   * (max_tokens must be 0 or absent); the prompt may fill the whole context.
   */
  pooling?: PoolingMode;
  /** false: this request never speculates, whatever `--speculative` says (runtime/speculative/). */
  speculate?: boolean;
}

export { InvalidRequest };

/**
 * Refuses, as validate would, a prompt known to be at least `atLeast` tokens that cannot fit the
 * context: the server asks before tokenizing a large prompt, from a lower bound on its count, so
 * that one that cannot fit is refused without the work.
 */
export function checkPromptLength(atLeast: number, context: number): void {
  if (atLeast >= context) throw promptTooLong(`at least ${atLeast}`, context);
}

/** The refusal of a prompt of `tokens` tokens (a count, or "at least N") the context cannot take. */
function promptTooLong(tokens: string, context: number): InvalidRequest {
  return new InvalidRequest(
    `The prompt is ${tokens} tokens; this model's context is ${context} tokens`,
    "messages",
    "context_length_exceeded",
  );
}

/**
 * The request `p` asks for, with every limit checked and every default filled in; throws
 * InvalidRequest naming the first parameter the runtime cannot take. `context`: the longest prompt
 * plus output a request may have.
 */
export function validate(
  p: SubmitParams,
  info: Pick<EngineInfo, "vocabSize" | "maxTopLogprobs">,
  context: number,
  options: Pick<
    RuntimeOptions,
    "maxTokensLimit" | "defaultReadingRate" | "defaultSlo" | "eosIds"
  >,
): RequestSpec {
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
  // A generating prompt leaves room for one token; a pooled one generates none.
  if (p.ids.length >= context + (p.pooling ? 1 : 0)) {
    throw promptTooLong(String(p.ids.length), context);
  }
  if (p.pooling && (p.maxTokens ?? 0) !== 0) {
    throw new InvalidRequest(
      "An embedding request generates no tokens",
      "max_tokens",
      "invalid_value",
    );
  }
  const limit = options.maxTokensLimit;
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
  const maxTokens = p.pooling
    ? 0
    : p.maxTokens ?? Math.min(room, limit, p.maxTokensDefault ?? Infinity);
  const topLogprobs = p.topLogprobs ?? 0;
  if (!Number.isInteger(topLogprobs) || topLogprobs < 0 || topLogprobs > info.maxTopLogprobs) {
    throw new InvalidRequest(
      `top_logprobs is at most ${info.maxTopLogprobs}`,
      "top_logprobs",
      "invalid_value",
    );
  }
  checkSamplingControls(p.sampling, info.vocabSize);
  const readingRate = p.readingRate ?? options.defaultReadingRate ?? 0;
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
    stopIds: new Set(p.stopIds ?? options.eosIds),
    readingRate,
    slo: { ...definedOnly(options.defaultSlo), ...definedOnly(p.slo) },
    priority: p.priority,
    ...(p.pooling ? { pooling: p.pooling } : {}),
    ...(p.speculate === false ? { speculate: false } : {}),
  };
}

/** Largest repetition_penalty taken (HF and vLLM take any > 0; past 10 it only bans). */
export const MAX_REPETITION_PENALTY = 10;
/** OpenAI's range of frequency_penalty and presence_penalty: ±2. */
export const MAX_PENALTY = 2;
/** OpenAI's range of a logit_bias value: ±100 (bans or forces a token). */
export const MAX_LOGIT_BIAS_VALUE = 100;

/** Throws InvalidRequest, naming the body parameter, unless the sampling controls are in range. */
function checkSamplingControls(s: SamplingParams, vocabSize: number): void {
  const refuse = (param: string, message: string) => {
    throw new InvalidRequest(message, param, "invalid_value");
  };
  const inRange = (v: number | undefined, lo: number, hi: number) =>
    v === undefined || (Number.isFinite(v) && v >= lo && v <= hi);
  const penalty = `must be between -${MAX_PENALTY} and ${MAX_PENALTY}`;
  if (!inRange(s.frequencyPenalty, -MAX_PENALTY, MAX_PENALTY)) {
    refuse("frequency_penalty", `frequency_penalty ${penalty}`);
  }
  if (!inRange(s.presencePenalty, -MAX_PENALTY, MAX_PENALTY)) {
    refuse("presence_penalty", `presence_penalty ${penalty}`);
  }
  const r = s.repetitionPenalty;
  if (r !== undefined && !(inRange(r, 0, MAX_REPETITION_PENALTY) && r > 0)) {
    refuse(
      "repetition_penalty",
      `repetition_penalty must be greater than 0 and at most ${MAX_REPETITION_PENALTY}`,
    );
  }
  if (!inRange(s.minP, 0, 1)) refuse("min_p", "min_p must be between 0 and 1");
  const bias = s.logitBias ?? [];
  if (bias.length > MAX_LOGIT_BIAS) {
    refuse("logit_bias", `logit_bias has ${bias.length} entries; the limit is ${MAX_LOGIT_BIAS}`);
  }
  const seen = new Set<number>();
  for (const [id, b] of bias) {
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
      refuse(
        "logit_bias",
        `logit_bias token ${id} is outside the vocabulary (0..${vocabSize - 1})`,
      );
    }
    if (seen.has(id)) refuse("logit_bias", `logit_bias names token ${id} twice`);
    seen.add(id);
    if (!inRange(b, -MAX_LOGIT_BIAS_VALUE, MAX_LOGIT_BIAS_VALUE)) {
      refuse(
        "logit_bias",
        `logit_bias for token ${id} must be between -${MAX_LOGIT_BIAS_VALUE} and ${MAX_LOGIT_BIAS_VALUE}`,
      );
    }
  }
}

/** Throws InvalidRequest unless `priority` is an integer in MIN_PRIORITY..MAX_PRIORITY. */
export function checkPriority(priority: number): void {
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
