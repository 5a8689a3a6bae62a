// A planner Worker whose solves never finish in time: it busy-waits (as a stuck solve would hold
// its thread) for the `tokens` of the first request, in ms, before answering like the real one.

/// <reference lib="deno.worker" />

import { orbitPlan } from "../../../runtime/plan/orbit_planner.ts";
import type { ToPlanner } from "../../../runtime/plan/planner_protocol.ts";

self.onmessage = (event: MessageEvent<ToPlanner>) => {
  const { seq, input } = event.data;
  const until = performance.now() + input.requests[0].tokens;
  while (performance.now() < until) { /* a solve that does not yield */ }
  self.postMessage({ seq, plan: orbitPlan(input) });
};

self.postMessage({ ready: true });
