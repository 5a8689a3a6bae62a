// Hono's body limit, answering with OpenAI's 413 envelope instead of a plain-text one.

import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ApiError } from "../openai/errors.ts";

export function limitBody(maxBytes: number): MiddlewareHandler {
  return bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw new ApiError(413, `Request body exceeds ${maxBytes} bytes`, null, "request_too_large");
    },
  });
}
