// OpenAI's wire format: request schemas (zod), the error envelope, and response/chunk builders.
// Sluice's extensions (reading_rate, slo_ttft_ms, slo_tbt_ms, top_k, ignore_eos) are optional.

import { z } from "zod";

export interface OpenAIError {
  error: { message: string; type: string; param: string | null; code: string | null };
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
    readonly type = status >= 500 ? "server_error" : "invalid_request_error",
  ) {
    super(message);
  }

  toJSON(): OpenAIError {
    return {
      error: { message: this.message, type: this.type, param: this.param, code: this.code },
    };
  }
}

/** Turns a zod failure into a 400 naming the first offending field. */
export function zodToApiError(error: z.ZodError): ApiError {
  const issue = error.issues[0];
  const param = issue.path.length ? issue.path.join(".") : null;
  const where = param ? `'${param}'` : "request body";
  return new ApiError(400, `Invalid ${where}: ${issue.message}`, param, "invalid_value");
}

const samplingFields = {
  model: z.string().min(1),
  max_tokens: z.number().int().min(1).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  top_k: z.number().int().min(0).nullish(),
  seed: z.number().int().nullish(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).nullish(),
  n: z.literal(1, { message: "only n = 1 is supported" }).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  presence_penalty: z.literal(0, { message: "presence_penalty is not supported (only 0)" })
    .nullish(),
  frequency_penalty: z.literal(0, { message: "frequency_penalty is not supported (only 0)" })
    .nullish(),
  user: z.string().nullish(),
  // Sluice extensions.
  reading_rate: z.number().positive().max(10000).nullish(),
  slo_ttft_ms: z.number().positive().nullish(),
  slo_tbt_ms: z.number().positive().nullish(),
  ignore_eos: z.boolean().nullish(),
};

const textPart = z.object({ type: z.literal("text"), text: z.string() });
const message = z.object({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: z.union([z.string(), z.array(textPart)]).nullable(),
  name: z.string().optional(),
});

export const ChatRequest = z.object({
  ...samplingFields,
  messages: z.array(message).min(1),
  max_completion_tokens: z.number().int().min(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
});
export type ChatRequest = z.infer<typeof ChatRequest>;

const tokenIds = z.array(z.number().int().min(0)).min(1);
export const CompletionRequest = z.object({
  ...samplingFields,
  prompt: z.union([
    z.string(),
    z.array(z.string()).length(1, { message: "only one prompt per request is supported" }),
    tokenIds,
    z.array(tokenIds).length(1, { message: "only one prompt per request is supported" }),
  ]),
  logprobs: z.number().int().min(0).max(20).nullish(),
  echo: z.literal(false, { message: "echo is not supported" }).nullish(),
  suffix: z.null({ message: "suffix is not supported" }).nullish(),
  best_of: z.literal(1, { message: "only best_of = 1 is supported" }).nullish(),
});
export type CompletionRequest = z.infer<typeof CompletionRequest>;

export function messageText(content: z.infer<typeof message>["content"]): string {
  if (content === null) return "";
  return typeof content === "string" ? content : content.map((p) => p.text).join("");
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export function usage(prompt: number, completion: number): Usage {
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
  };
}

/** One token's logprob entry for the chat format. */
export interface ChatLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

/** Logprobs of one completion chunk in the legacy completions format. */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Record<string, number>[] | null;
  text_offset: number[];
}

export type FinishReason = "stop" | "length" | null;

export function chatChunk(
  id: string,
  created: number,
  model: string,
  delta: { role?: "assistant"; content?: string },
  finish: FinishReason,
  logprobs: ChatLogprob[] | null = null,
) {
  return {
    id,
    object: "chat.completion.chunk",
    created,
    model,
    system_fingerprint: "sluice",
    choices: [{
      index: 0,
      delta,
      logprobs: logprobs ? { content: logprobs } : null,
      finish_reason: finish,
    }],
  };
}

export function completionChunk(
  id: string,
  created: number,
  model: string,
  text: string,
  finish: FinishReason,
  logprobs: CompletionLogprobs | null = null,
  tokenIds?: number[],
) {
  // token_ids (extension) lets clients count tokens exactly even when text is held back.
  const choice = {
    index: 0,
    text,
    logprobs,
    finish_reason: finish,
    ...(tokenIds ? { token_ids: tokenIds } : {}),
  };
  return {
    id,
    object: "text_completion",
    created,
    model,
    system_fingerprint: "sluice",
    choices: [choice],
  };
}

export function usageChunk(id: string, created: number, model: string, object: string, u: Usage) {
  return { id, object, created, model, system_fingerprint: "sluice", choices: [], usage: u };
}
