// GET /metrics: the Prometheus exposition, with every loaded model's gauges and counters sampled
// now (vLLM's names carry each model's id as model_name; Sluice's own sum over the models) and the
// router's: which models are loaded, loads and unloads.

import { Hono } from "hono";
import { PROMETHEUS_CONTENT_TYPE } from "../metrics/exposition.ts";
import type { ServerMetrics } from "../metrics/server_metrics.ts";
import type { ServerState } from "../state/server_state.ts";

export function metricsRoutes(state: ServerState, metrics: ServerMetrics): Hono {
  return new Hono().get("/metrics", (c) => {
    metrics.observeModels(state.models);
    return c.text(metrics.render(), 200, { "content-type": PROMETHEUS_CONTENT_TYPE });
  });
}
