// GET /health: 200 "ready" once the model is loaded; 503 while it loads, when it failed, and while
// the server drains for shutdown (so a load balancer stops sending work). A load failure's message
// goes out without the absolute paths in it (anyone may ask /health); the log has it whole.

import { Hono } from "hono";
import { redactPaths } from "../state/redact_paths.ts";
import type { ServerState } from "../state/server_state.ts";

export function healthRoutes(state: ServerState): Hono {
  return new Hono().get("/health", (c) => {
    const s = state.model;
    if (s.status === "failed") {
      return c.json({ status: "failed", error: redactPaths(s.error) }, 503);
    }
    if (s.status === "loading") return c.json({ status: "loading" }, 503);
    if (state.draining) return c.json({ status: "draining" }, 503);
    return c.json({ status: "ready" }, 200);
  });
}
