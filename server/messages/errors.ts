// Anthropic's error envelope, {"type":"error","error":{"type","message"}}, for every answer under
// /v1/messages: the same ApiErrors the rest of the server throws, their type named by status as
// Anthropic names it. The status stays the server's own: an overloaded or closing server is a 503
// (Anthropic's 529 is not HTTP's), typed overloaded_error so a client retries it as one.

import type { ApiError } from "../openai/errors.ts";

export interface AnthropicError {
  type: "error";
  error: { type: string; message: string };
}

const typeByStatus: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  503: "overloaded_error",
  529: "overloaded_error",
};

export function anthropicError(err: ApiError): AnthropicError {
  const type = typeByStatus[err.status] ??
    (err.status >= 500 ? "api_error" : "invalid_request_error");
  return { type: "error", error: { type, message: err.message } };
}

/** Whether an answer to `path` speaks Anthropic's envelope. */
export const isMessagesPath = (path: string) =>
  path === "/v1/messages" || path.startsWith("/v1/messages/");
