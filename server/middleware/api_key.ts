// Bearer-token authentication for /v1: with a key configured, a request without
// `Authorization: Bearer <key>` gets OpenAI's 401 envelope. The scheme is case-insensitive
// (RFC 9110: `bearer KEY` and `BEARER KEY` are the same); the key is compared exactly.

import type { MiddlewareHandler } from "hono";
import { ApiError } from "../openai/errors.ts";

export function apiKey(key: string | undefined): MiddlewareHandler {
  return async (c, next) => {
    if (key && bearerToken(c.req.header("authorization")) !== key) {
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

/** The token of a Bearer authorization header, whatever the scheme's case. */
function bearerToken(header: string | undefined): string | undefined {
  return /^bearer +(\S+) *$/i.exec(header ?? "")?.[1];
}
