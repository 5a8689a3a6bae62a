// The Responses API's response object, as every lifecycle event and the JSON answer carry it: its
// id and status, the request's settings echoed back, the output items so far, and usage once the
// turn is over. Nothing is stored: `store` is echoed false whatever the request said.

import type { ResponsesRequest } from "./schema.ts";

export type ResponseStatus = "in_progress" | "completed" | "incomplete";

/** What one response repeats in every event: who it is, and the request's settings. */
export interface ResponseHead {
  id: string;
  /** Unix seconds. */
  createdAt: number;
  model: string;
  promptTokens: number;
  /** The request's settings as the response echoes them (see echoSettings). */
  settings: Record<string, unknown>;
}

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export function responseObject(
  head: ResponseHead,
  status: ResponseStatus,
  output: object[],
  completionTokens: number | null,
) {
  return {
    id: head.id,
    object: "response",
    created_at: head.createdAt,
    status,
    error: null,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    model: head.model,
    output,
    ...head.settings,
    usage: completionTokens === null ? null : usage(head.promptTokens, completionTokens),
  };
}

function usage(input: number, output: number): ResponseUsage {
  return {
    input_tokens: input,
    // Neither is counted apart: prefix-cache hits and reasoning tokens are in the totals.
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + output,
  };
}

/** The request's settings as OpenAI echoes them in a response (defaults where absent). */
export function echoSettings(body: ResponsesRequest): Record<string, unknown> {
  return {
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    metadata: body.metadata ?? {},
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: body.reasoning ?? null,
    store: false,
    temperature: body.temperature ?? 1,
    text: { format: body.text?.format ?? { type: "text" } },
    tool_choice: body.tool_choice ?? "auto",
    tools: body.tools ?? [],
    top_p: body.top_p ?? 1,
    truncation: "disabled",
    user: body.user ?? null,
  };
}
