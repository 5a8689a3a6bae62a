// API-key authentication: with a key configured, a request without `Authorization: Bearer <key>`
// or `x-api-key: <key>` (Anthropic's clients send that one) gets a 401. The scheme is
// case-insensitive (RFC 9110: `bearer KEY` and `BEARER KEY` are the same); the key is compared
// exactly, and in constant time: both sides are hashed to equal-length digests first, so neither how
// many leading characters matched nor the key's length shows in how long a refusal takes.

import type { MiddlewareHandler } from "hono";
import { createHash, timingSafeEqual } from "node:crypto";
import { ApiError } from "../openai/errors.ts";

export function apiKey(key: string | undefined): MiddlewareHandler {
  const expected = key ? digest(key) : null;
  return async (c, next) => {
    const given = bearerToken(c.req.header("authorization")) ?? c.req.header("x-api-key");
    if (expected && !timingSafeEqual(digest(given ?? ""), expected)) {
      throw new ApiError(
        401,
        "Missing or invalid API key (send 'Authorization: Bearer <key>' or 'x-api-key: <key>')",
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

const digest = (text: string) => createHash("sha256").update(text).digest();
