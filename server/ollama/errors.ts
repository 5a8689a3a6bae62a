// Ollama's error shape, {"error": "..."}, for every answer under /api: the same ApiErrors the rest
// of the server throws, with their status (400 bad input, 404 unknown model, 501 what Sluice does
// not do, 503 loading or closing) and only their message, as Ollama's clients read it. Headers an
// error carries (Retry-After, Allow) go out with it.

import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ApiError } from "../openai/errors.ts";

export interface OllamaError {
  error: string;
}

export function ollamaError(err: ApiError): OllamaError {
  return { error: err.message };
}

/** The /api routes' error handler: anything thrown, answered in Ollama's shape. */
export function answerOllamaError(err: unknown, c: Context): Response {
  const e = ApiError.from(err);
  return c.json(ollamaError(e), e.status as ContentfulStatusCode, e.headers);
}

/** What Sluice does not do (a registry, model files): 501, naming what to do instead. */
export function notImplemented(what: string, instead: string): ApiError {
  return new ApiError(
    501,
    `${what} is not supported by Sluice: ${instead}`,
    null,
    "not_implemented",
  );
}

/** A request's field that Sluice refuses: 400 naming it. */
export function badField(field: string, message: string): ApiError {
  return new ApiError(400, `invalid '${field}': ${message}`, field, "invalid_value");
}
