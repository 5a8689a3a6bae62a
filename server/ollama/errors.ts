// Ollama's error shape, {"error": "..."}, for every answer under /api (app.ts's error handler and
// 404 choose it by path): the same ApiErrors the rest of the server throws, with their status (400
// bad input, 404 unknown model, 501 what Sluice does not do, 503 loading or closing) and only their
// message, as Ollama's clients read it.

import { ApiError } from "../openai/errors.ts";

export interface OllamaError {
  error: string;
}

export function ollamaError(err: ApiError): OllamaError {
  return { error: err.message };
}

/** Whether an answer to `path` speaks Ollama's shape. */
export const isOllamaPath = (path: string) => path === "/api" || path.startsWith("/api/");

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
