// Oversized request headers get 431 with OpenAI's envelope. Deno's HTTP server has a limit of its
// own (measured on Deno 2.9.6: a request head over about 64 KiB, or over about 128 header lines,
// gets a bare `400 Bad Request` with an empty body before the app sees it); the front door
// (server/connections/) refuses heads over MAX_HEAD_BYTES with 431 before Deno's server sees them,
// and this lower limit answers the rest the same documented way.

import type { MiddlewareHandler } from "hono";
import { ApiError } from "../openai/errors.ts";

/** Header bytes allowed: "name: value\r\n" summed over the request's headers. */
export const MAX_HEADER_BYTES = 32 * 1024;
/** Whole request head bytes (request line and headers) the front door lets through. */
export const MAX_HEAD_BYTES = 48 * 1024;

export function limitHeaders(maxBytes = MAX_HEADER_BYTES): MiddlewareHandler {
  return async (c, next) => {
    let bytes = 0;
    for (const [name, value] of c.req.raw.headers) bytes += name.length + value.length + 4;
    if (bytes > maxBytes) {
      throw new ApiError(
        431,
        `Request headers are ${bytes} bytes; the limit is ${maxBytes}`,
        null,
        "request_headers_too_large",
      );
    }
    await next();
  };
}
