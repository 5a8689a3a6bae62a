// GET /state: the playground panel's view of the server as JSON (server/playground/panel_state.ts).
// It sits beside /metrics, outside /v1, for the same reason: it is read every second by a page, so
// it must not count as API traffic in sluice_requests_total, and like /metrics it tells counts and
// timings, never anyone's text.

import { Hono } from "hono";
import type { ServerMetrics } from "../metrics/server_metrics.ts";
import { PanelStateBuilder } from "../playground/panel_state.ts";
import type { ServerState } from "../state/server_state.ts";

export function stateRoutes(state: ServerState, metrics: ServerMetrics): Hono {
  const panel = new PanelStateBuilder(metrics);
  return new Hono().get(
    "/state",
    (c) => c.json(panel.snapshot(state), 200, { "cache-control": "no-store" }),
  );
}
