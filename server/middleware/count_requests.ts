// Counts every /v1 request once, by its final status, in sluice_requests_total; a client that went
// away before its answer counts as 499 whatever the handler returned. The request's observer is
// put in the context for the handler: one that streams takes it over (keepOpen) and finishes it
// when its stream ends.

import type { MiddlewareHandler } from "hono";
import type { RequestObserver, ServerMetrics } from "../metrics/server_metrics.ts";

/** The Hono environment of the /v1 routes. */
export interface ObservedEnv {
  Variables: { observer: RequestObserver };
}

export function countRequests(metrics: ServerMetrics): MiddlewareHandler<ObservedEnv> {
  return async (c, next) => {
    const observer = metrics.requestStarted();
    c.set("observer", observer);
    try {
      await next();
    } finally {
      if (!observer.keptOpen) observer.finish(c.req.raw.signal.aborted ? 499 : c.res.status);
    }
  };
}
