// GET /metrics: the Prometheus exposition, with the runtime's gauges and counters sampled now.

import { Hono } from "hono";
import { PROMETHEUS_CONTENT_TYPE } from "../metrics/exposition.ts";
import type { ServerMetrics } from "../metrics/server_metrics.ts";
import type { ServerState } from "../state/server_state.ts";

export function metricsRoutes(state: ServerState, metrics: ServerMetrics): Hono {
  return new Hono().get("/metrics", (c) => {
    if (state.model.status === "ready") metrics.observeRuntime(state.model.runtime);
    return c.text(metrics.render(), 200, { "content-type": PROMETHEUS_CONTENT_TYPE });
  });
}
