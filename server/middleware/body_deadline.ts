// A request body must arrive within a deadline from the request's arrival. A client that sends
// its headers and then trickles its body (or stops sending) would otherwise hold a request, its
// buffer and a connection forever: past the deadline the body read fails with 408 and OpenAI's
// envelope, and the rest of the body is dropped. The request's body is replaced by one that
// enforces the deadline, so whoever reads it (the body limit, the JSON parser) gets the 408.

import type { MiddlewareHandler } from "hono";
import { ApiError } from "../openai/errors.ts";

/** How long a client may take to send a request body, by default. */
export const BODY_TIMEOUT_MS = 30_000;

export function bodyDeadline(timeoutMs = BODY_TIMEOUT_MS): MiddlewareHandler {
  return async (c, next) => {
    const body = c.req.raw.body;
    if (!body) return await next();
    const source = body.getReader();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(bodyTimedOut(timeoutMs)), timeoutMs);
    });
    expired.catch(() => {}); // observed only by a read that races it
    const timed = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { done, value } = await Promise.race([source.read(), expired]);
          if (!done) return controller.enqueue(value);
          clearTimeout(timer);
          controller.close();
        } catch (err) {
          clearTimeout(timer);
          source.cancel().catch(() => {});
          controller.error(err);
        }
      },
      cancel(reason) {
        clearTimeout(timer);
        return source.cancel(reason);
      },
    });
    c.req.raw = new Request(c.req.raw, { body: timed, duplex: "half" } as RequestInit);
    try {
      await next();
    } finally {
      clearTimeout(timer); // a body nobody read is nobody's to wait for
    }
  };
}

function bodyTimedOut(timeoutMs: number): ApiError {
  return new ApiError(
    408,
    `The request body did not arrive within ${timeoutMs / 1000} s`,
    null,
    "request_timeout",
    "invalid_request_error",
    { Connection: "close" },
  );
}
