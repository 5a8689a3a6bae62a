// Which web pages may call this server. A browser tags every cross-origin call with the page's
// Origin; the server trusts its own origin (the playground at / calls the API from there) and the
// pages listed with --cors-origins (none by default; `*` for any), as llama.cpp and Ollama do.
//
// - A request whose Origin is neither is refused with 403 before any route runs, so a foreign page
//   can neither read nor cause anything (a "simple" POST needs no preflight; this stops it too).
// - A listed origin gets CORS headers: preflights (OPTIONS) are answered here, and every response
//   carries Access-Control-Allow-Origin, so its page can read answers and streams.
// - Requests without an Origin (curl, SDKs, top-level navigation) pass: they are not from a page.
//
// The Host check (host_check.ts) runs first: "same origin" is only as good as the Host it is
// compared with.

import type { MiddlewareHandler } from "hono";
import { ApiError } from "../openai/errors.ts";

const ALLOWED_METHODS = "GET, POST, OPTIONS";
/** Preflights are cached this long by the browser. */
const PREFLIGHT_MAX_AGE_S = 600;

export function crossOrigin(listed: readonly string[] = []): MiddlewareHandler {
  for (const o of listed) {
    if (o !== "*" && !/^https?:\/\/[^/?#\s]+\/?$/i.test(o.trim())) {
      throw new TypeError(`--cors-origins: '${o}' is not an origin (http[s]://host[:port], or *)`);
    }
  }
  const origins = new Set(listed.map(normalizeOrigin));
  return async (c, next) => {
    const origin = c.req.header("origin");
    if (origin === undefined) return await next();
    const host = c.req.header("host") ?? new URL(c.req.url).host;
    const sameOrigin = isSameOrigin(origin, host);
    const allow = origins.has("*") ? "*" : origins.has(normalizeOrigin(origin)) ? origin : null;
    if (!sameOrigin && allow === null) {
      throw new ApiError(
        403,
        `Origin '${origin}' may not call this server (start it with --cors-origins to allow it)`,
        null,
        "origin_not_allowed",
        "permission_error",
      );
    }
    if (allow !== null) {
      c.header("Access-Control-Allow-Origin", allow);
      c.header("Access-Control-Expose-Headers", "Retry-After, Sluice-Request-Id");
      if (allow !== "*") c.header("Vary", "Origin", { append: true });
    }
    const preflight = c.req.method === "OPTIONS" && c.req.header("access-control-request-method");
    if (!preflight) return await next();
    c.header("Access-Control-Allow-Methods", ALLOWED_METHODS);
    const asked = c.req.header("access-control-request-headers");
    if (asked) c.header("Access-Control-Allow-Headers", asked);
    // Chrome asks before a public page may reach a loopback or LAN server (Private Network Access).
    if (c.req.header("access-control-request-private-network") === "true") {
      c.header("Access-Control-Allow-Private-Network", "true");
    }
    c.header("Access-Control-Max-Age", String(PREFLIGHT_MAX_AGE_S));
    return c.body(null, 204);
  };
}

/** Whether `origin` is the server's own: the same host and port as the Host the page used. */
export function isSameOrigin(origin: string, host: string): boolean {
  try {
    const url = new URL(origin);
    // Behind a TLS proxy the page's scheme is https; the host is what matters.
    if (url.protocol !== "http:" && url.protocol !== "https:") return false;
    return url.host === new URL(`${url.protocol}//${host}`).host;
  } catch {
    return false; // "null" (sandboxed pages, file://) or garbage
  }
}

/** Origins compare as the browser serializes them: lower-case, no trailing slash. */
function normalizeOrigin(origin: string): string {
  return origin.trim().toLowerCase().replace(/\/+$/, "");
}
