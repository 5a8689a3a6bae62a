// A known path asked with a method it does not take (GET /v1/completions, POST /v1/models) gets
// 405 with OpenAI's envelope and an Allow header naming the methods it takes, not a 404 saying the
// route does not exist. Built from the app's own route table, so the two cannot drift apart: call
// it once every route is mounted (a route added after it is not covered).

import type { Hono } from "hono";
import { ApiError } from "../openai/errors.ts";

// deno-lint-ignore no-explicit-any
export function answerWrongMethods(app: Hono<any>): void {
  const allowed = new Map<string, Set<string>>();
  for (const { method, path } of app.routes) {
    if (method === "ALL") continue; // middleware
    const methods = allowed.get(path) ?? new Set<string>();
    methods.add(method);
    if (method === "GET") methods.add("HEAD"); // Hono answers HEAD with the GET handler
    allowed.set(path, methods);
  }
  for (const [path, methods] of allowed) {
    const allow = [...methods].join(", ");
    app.all(path, (c) => {
      throw new ApiError(
        405,
        `Method ${c.req.method} is not allowed on ${c.req.path} (allowed: ${allow})`,
        null,
        "method_not_allowed",
        "invalid_request_error",
        { Allow: allow },
      );
    });
  }
}
