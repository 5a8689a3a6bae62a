// Bearer-token authentication for /v1: with a key configured, a request without
// `Authorization: Bearer <key>` gets OpenAI's 401 envelope.

import type { MiddlewareHandler } from "hono";
import { ApiError } from "../openai/errors.ts";

export function apiKey(key: string | undefined): MiddlewareHandler {
  return async (c, next) => {
    if (key && c.req.header("authorization") !== `Bearer ${key}`) {
      throw new ApiError(
        401,
        "Missing or invalid API key (send 'Authorization: Bearer <key>')",
        null,
        "invalid_api_key",
        "authentication_error",
      );
    }
    await next();
  };
}
