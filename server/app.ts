// The HTTP edge: an OpenAI-compatible Hono app over the runtime. This file only assembles it: the
// error envelope, the middleware on /v1 (request counting, API key, body limit) and the routes in
// server/routes/. createApp is used by `serve` and by the tests.

import { Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ServerMetrics } from "./metrics/server_metrics.ts";
import { apiKey } from "./middleware/api_key.ts";
import { limitBody } from "./middleware/body_limit.ts";
import { countRequests, type ObservedEnv } from "./middleware/count_requests.ts";
import { ApiError } from "./openai/errors.ts";
import { completionsRoutes } from "./routes/completions.ts";
import { healthRoutes } from "./routes/health.ts";
import { metricsRoutes } from "./routes/metrics.ts";
import { modelsRoutes } from "./routes/models.ts";
import type { ServerState } from "./state.ts";

export interface ServerConfig {
  /** The id clients pass as `model` (also accepted: "default"). */
  modelId: string;
  apiKey?: string;
  maxBodyBytes: number;
}

export function createApp(
  state: ServerState,
  config: ServerConfig,
  metrics: ServerMetrics,
): Hono<ObservedEnv> {
  const app = new Hono<ObservedEnv>();
  app.onError((err, c) => {
    const e = ApiError.from(err);
    return c.json(e.toJSON(), e.status as ContentfulStatusCode, e.headers);
  });
  app.notFound((c) => {
    const e = new ApiError(404, `Unknown route ${c.req.method} ${c.req.path}`, null, "not_found");
    return c.json(e.toJSON(), 404);
  });
  app.use("/v1/*", countRequests(metrics), apiKey(config.apiKey), limitBody(config.maxBodyBytes));
  app.route("/", healthRoutes(state));
  app.route("/", metricsRoutes(state, metrics));
  app.route("/v1", modelsRoutes(state, config.modelId));
  app.route("/v1", completionsRoutes(state, config.modelId));
  return app;
}
