// Reads a request body as JSON and checks its shape against a zod schema, answering with OpenAI's
// envelopes: 415 unless the media type is exactly application/json, 400 for a body that is not
// JSON, nests deeper than MAX_JSON_DEPTH, or has a first field that does not fit, 499 for one the
// client stopped sending halfway.
//
// The media type is parsed, not searched: `text/plain;charset=application/json` is text/plain. That
// matters for safety, not only for conformance: text/plain is a type a web page may send to any
// server without a CORS preflight, so only a parsed application/json guarantees the browser asked
// this server's CORS policy (middleware/cross_origin.ts) first.

import type { Context } from "hono";
import type { z } from "zod";
import { ApiError, clientClosed, zodToApiError } from "./errors.ts";

const YIELD_CHARS = 64 * 1024;

/**
 * Arrays and objects a body may nest. JSON.parse takes thousands of levels, but what the request
 * then goes through (zod, JSON.stringify of a tool's schema into the prompt, the chat template, the
 * grammar compiler) recurses, and a tool schema 5,000 levels deep overflowed the stack: a 500. Real
 * schemas nest a few dozen levels at most.
 */
export const MAX_JSON_DEPTH = 128;

/** How deep `value` nests (a scalar is 0), counted without recursion, stopping past `limit`. */
function nestingDepth(value: unknown, limit: number): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== "object") continue;
    if (depth + 1 > deepest) deepest = depth + 1;
    if (deepest > limit) return deepest;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (child !== null && typeof child === "object") stack.push([child, depth + 1]);
    }
  }
  return deepest;
}

/**
 * `anyMediaType`: read the body as JSON whatever its Content-Type (Ollama's API: its documented
 * `curl -d` sends form encoding). A foreign page is still refused by the Origin check
 * (middleware/cross_origin.ts), which only pages listed with --cors-origins pass.
 */
export async function parseBody<T>(
  c: Context,
  schema: z.ZodType<T>,
  opts: { anyMediaType?: boolean } = {},
): Promise<T> {
  const header = c.req.header("content-type");
  if (!opts.anyMediaType && mediaType(header) !== "application/json") {
    // 415, not 400 (RFC 9110 §15.5.16): the body was not even read, and a client can tell a wrong
    // header from a wrong body by the status alone.
    throw new ApiError(
      415,
      `Content-Type must be application/json (got ${header ? `'${header}'` : "none"})`,
      null,
      "invalid_content_type",
    );
  }
  let text: string;
  try {
    text = await c.req.text();
  } catch (err) {
    if (err instanceof ApiError) throw err; // too slow (408), too large (413)
    // The body stopped short: the client went away (or reset) before sending all it announced.
    throw clientClosed();
  }
  // A large body's parse waits for the next turn of the event loop: bodies that finished arriving
  // together are then parsed one per turn, with other connections' reads and writes in between.
  if (text.length >= YIELD_CHARS) await new Promise((r) => setTimeout(r, 0));
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ApiError(400, "The request body is not valid JSON", null, "invalid_json");
  }
  const depth = nestingDepth(body, MAX_JSON_DEPTH);
  if (depth > MAX_JSON_DEPTH) {
    throw new ApiError(
      400,
      `The request body nests more than ${MAX_JSON_DEPTH} levels deep`,
      null,
      "invalid_json",
    );
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw zodToApiError(parsed.error);
  return parsed.data;
}

/**
 * The `type/subtype` of a Content-Type header, lower-cased, its parameters dropped (RFC 9110
 * §8.3.1); null when the header is absent or not of that form.
 */
export function mediaType(header: string | undefined): string | null {
  if (header === undefined) return null;
  const essence = header.split(";", 1)[0].trim().toLowerCase();
  return /^[!#$%&'*+.^_`|~0-9a-z-]+\/[!#$%&'*+.^_`|~0-9a-z-]+$/.test(essence) ? essence : null;
}
