// The offload planner's Worker: solves each plan it is sent, in order, off the thread that runs
// the step loop, so a slow solve delays only the next plan, never a step.

/// <reference lib="deno.worker" />

import { orbitPlan } from "./orbit_planner.ts";
import type { FromPlanner, ToPlanner } from "./planner_protocol.ts";

self.onmessage = (event: MessageEvent<ToPlanner>) => {
  const { seq, input } = event.data;
  let answer: FromPlanner;
  try {
    answer = { seq, plan: orbitPlan(input) };
  } catch (err) {
    answer = { seq, error: err instanceof Error ? err.message : String(err) };
  }
  self.postMessage(answer);
};

self.postMessage({ ready: true } satisfies FromPlanner);
