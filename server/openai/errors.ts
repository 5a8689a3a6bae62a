// OpenAI's error envelope, {"error":{"message","type","param","code"}}, and the errors the server
// answers with. An ApiError thrown anywhere becomes that envelope in app.ts's error handler; in a
// stream that has already started, it becomes the payload of the stream's last event.

import type { z } from "zod";

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
    /** Response headers the answer must carry (Retry-After). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  toJSON(): OpenAIError {
    return {
      error: { message: this.message, type: this.type, param: this.param, code: this.code },
    };
  }

  /**
   * Anything thrown, as an ApiError: unknown errors are a 500 with their message, logged with
   * their stack, since each is a failure no handler foresaw (the log is how a stray 500 in
   * sluice_requests_total gets traced to its input).
   */
  static from(err: unknown): ApiError {
    if (err instanceof ApiError) return err;
    console.error("sluice: unexpected error (answered 500):", err);
    return new ApiError(500, err instanceof Error ? err.message : String(err));
  }
}

/** Turns a zod failure into a 400 naming the first offending field. */
export function zodToApiError(error: z.ZodError): ApiError {
  const issue = error.issues[0];
  const param = issue.path.length ? issue.path.join(".") : null;
  const where = param ? `'${param}'` : "request body";
  return new ApiError(400, `Invalid ${where}: ${issue.message}`, param, "invalid_value");
}

export const shuttingDown = (message = "Server is shutting down") =>
  new ApiError(503, message, null, "shutting_down");

/** A response cut short because the server stopped before it was complete. */
export const cutByShutdown = () =>
  new ApiError(
    503,
    "The server shut down before the response was complete",
    null,
    "server_shutdown",
  );

export const clientClosed = () =>
  new ApiError(499, "The client closed the request", null, "client_closed");
