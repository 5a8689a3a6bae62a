// GET /health: 200 "ready" once the model is loaded; 503 while it loads, when it failed, and while
// the server drains for shutdown (so a load balancer stops sending work). A load failure's message
// goes out without the absolute paths in it (anyone may ask /health); the log has it whole.
//
// The same answer is given at the front door (healthAtTheDoor) for a plain probe: a load balancer's
// or orchestrator's GET with no body and no Origin, from a Host this server answers to. Through the
// HTTP server a probe takes several turns of the HTTP thread, each behind whatever else is being
// read then (eight 1 MiB bodies arriving at once held it tens of milliseconds per turn). Anything
// else (a browser's cross-origin fetch, a query string, no Host, headers that may be over the
// limit) takes the route below.

import { Hono } from "hono";
import { jsonResponseBytes } from "../connections/error_response.ts";
import type { RequestHead } from "../connections/request_head.ts";
import { MAX_HEADER_BYTES } from "../middleware/header_limit.ts";
import { hostAllowed, type HostPolicy } from "../middleware/host_check.ts";
import { redactPaths } from "../state/redact_paths.ts";
import type { ServerState } from "../state/server_state.ts";

/** The health answer for the server's state now. */
export function health(state: ServerState): { status: 200 | 503; body: Record<string, string> } {
  const s = state.model;
  if (s.status === "failed") {
    return { status: 503, body: { status: "failed", error: redactPaths(s.error) } };
  }
  if (s.status === "loading") return { status: 503, body: { status: "loading" } };
  if (state.draining) return { status: 503, body: { status: "draining" } };
  return { status: 200, body: { status: "ready" } };
}

export function healthRoutes(state: ServerState): Hono {
  return new Hono().get("/health", (c) => {
    const { status, body } = health(state);
    return c.json(body, status);
  });
}

/** The front door's answer to a plain GET /health (see above), or null to pass the request on. */
export function healthAtTheDoor(state: ServerState, hosts: HostPolicy) {
  return (head: RequestHead): Uint8Array | null => {
    if (head.method !== "GET" || head.target !== "/health" || head.origin) return null;
    if (head.host === null || !hostAllowed(hosts, head.host)) return null;
    // A head that may be over the header limit gets the route's 431, not an answer from here.
    if (head.bytes > MAX_HEADER_BYTES) return null;
    const { status, body } = health(state);
    return jsonResponseBytes(status, body);
  };
}
