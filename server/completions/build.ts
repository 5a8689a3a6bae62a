// The one request builder for both endpoints: turns a parsed chat or completion body into what the
// runtime runs (SubmitParams) and what writes its answer (a text stream for detokenizing and stop
// strings, a response writer for the wire format). The endpoint's differences come from its kind.
// No limit is checked here: the runtime checks every one, once (a large prompt's length through
// `checkLength`, before it is tokenized).

import type { PromptEncoder, Tokenizer } from "../../runtime/service.ts";
import type { RequestSlo, SubmitParams } from "../../runtime/service.ts";
import { tokenNames } from "../openai/logprobs.ts";
import type { SharedFields } from "../openai/schemas.ts";
import type { CheckLength, Endpoint, Kind } from "./kinds.ts";
import { TextStream } from "./text_stream.ts";
import { ResponseWriter } from "./writer.ts";

export interface BuiltRequest {
  /** What the runtime runs; the route adds the abort signal. */
  params: Omit<SubmitParams, "signal">;
  text: TextStream;
  writer: ResponseWriter;
  stream: boolean;
  /** Send a usage chunk before [DONE]. */
  includeUsage: boolean;
  /** Give each streamed chunk that carries tokens their generation times (`sluice_timing`). */
  includeTiming: boolean;
}

export async function buildRequest<B extends SharedFields>(
  kind: Endpoint<B>,
  body: B,
  text: { tokenizer: Tokenizer; prompts: PromptEncoder },
  model: string,
  checkLength?: CheckLength,
): Promise<BuiltRequest> {
  const tok = text.tokenizer;
  const ids = await kind.promptIds(body, text.prompts, checkLength);
  const topLogprobs = kind.logprobs(body);
  return {
    params: submitParams(kind, body, ids),
    text: new TextStream(tok, stopStrings(body)),
    writer: new ResponseWriter(
      kind,
      model,
      ids.length,
      topLogprobs === null
        ? null
        : tokenNames((id) => tok.decode([id]), body.return_tokens_as_token_ids ?? false),
    ),
    stream: body.stream ?? false,
    includeUsage: body.stream_options?.include_usage ?? false,
    includeTiming: body.stream_options?.include_timing ?? false,
  };
}

/** What the runtime runs for `body` over the prompt `ids` (the route adds the abort signal). */
export function submitParams<B extends SharedFields>(
  kind: Kind<B>,
  body: B,
  ids: number[],
): Omit<SubmitParams, "signal"> {
  const slo: RequestSlo = {};
  // Only the targets given: an undefined one would hide the server's default.
  if (body.slo_ttft_ms != null) slo.ttftMs = body.slo_ttft_ms;
  if (body.slo_tbt_ms != null) slo.tbtMs = body.slo_tbt_ms;
  return {
    ids,
    maxTokens: kind.maxTokens(body),
    maxTokensDefault: kind.defaultMaxTokens,
    sampling: {
      temperature: body.temperature ?? 1,
      topK: body.top_k ?? 0,
      topP: body.top_p ?? 1,
      seed: (body.seed ?? Math.floor(Math.random() * 2 ** 31)) >>> 0,
      // Off unless given; the runtime checks the ids and ranges (400 naming the field).
      ...(body.logit_bias != null && {
        logitBias: Object.entries(body.logit_bias).map(([id, bias]) => [Number(id), bias]),
      }),
      ...(body.frequency_penalty != null && { frequencyPenalty: body.frequency_penalty }),
      ...(body.presence_penalty != null && { presencePenalty: body.presence_penalty }),
      ...(body.repetition_penalty != null && { repetitionPenalty: body.repetition_penalty }),
      ...(body.min_p != null && { minP: body.min_p }),
    },
    topLogprobs: kind.logprobs(body) ?? 0,
    stopIds: body.ignore_eos ? [] : undefined,
    // Nobody reads a reply that comes whole token by token: pacing is for streams only (0 is
    // unpaced, whatever the server's default rate).
    readingRate: body.stream ? body.reading_rate ?? undefined : 0,
    slo,
    priority: body.priority ?? undefined,
  };
}

export function stopStrings(body: SharedFields): string[] {
  return body.stop == null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop;
}
