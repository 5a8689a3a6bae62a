// POST /v1/requests/{id}/priority: changes a running request's priority (a Sluice extension; lower
// is served first, runtime/policy/priority.ts). `id` is the one its response carries (chatcmpl-…,
// cmpl-…; a stream's first chunk, or its `sluice-request-id` header). A request that is unknown or
// has finished generating is a 404; the change applies from the next step.

import { Hono } from "hono";
import type { LiveRequests } from "../completions/live_requests.ts";
import type { ObservedEnv } from "../middleware/count_requests.ts";
import { parseBody } from "../openai/body.ts";
import { ApiError } from "../openai/errors.ts";
import { PriorityRequest } from "../openai/schemas.ts";

export function requestsRoutes(live: LiveRequests): Hono<ObservedEnv> {
  return new Hono<ObservedEnv>().post("/requests/:id/priority", async (c) => {
    const id = c.req.param("id");
    const { priority } = await parseBody(c, PriorityRequest);
    if (!live.get(id)?.setPriority(priority)) {
      throw new ApiError(404, `No running request with id '${id}'`, "id", "request_not_found");
    }
    return c.json({ id, object: "sluice.request", priority });
  });
}
