// Model routers for server tests: one whose models are already loaded (the usual single-model
// server), and one for a server that has not started, whose models never load.

import { type LoadedModel, type ModelEntry, ModelRouter } from "../../runtime/model_router.ts";
import type { ServerState } from "../../server/state/server_state.ts";

export const entry = (id: string, sizeBytes = 0): ModelEntry => ({
  id,
  source: `/models/${id}`,
  aliases: [],
  sizeBytes,
});

/** A router holding `models` (by id), each loaded now, kept loaded (keep-alive forever). */
export async function loadedRouter(models: Record<string, LoadedModel>): Promise<ModelRouter> {
  const router = new ModelRouter(Object.keys(models).map((id) => entry(id)), {
    open: (e) => Promise.resolve(models[e.id]),
    keepAliveMs: Infinity,
    maxLoaded: Object.keys(models).length,
    deviceBudgetBytes: null,
    extraDeviceBytes: 0,
    pinned: [],
  });
  for (const id of Object.keys(models)) (await router.acquire(id)).release();
  return router;
}

/** A router naming `id` whose load never succeeds (a server still starting, or failed). */
export function unloadableRouter(id = "m"): ModelRouter {
  return new ModelRouter([entry(id)], {
    open: () => Promise.reject(new Error("this test's model cannot be loaded")),
    keepAliveMs: Infinity,
    maxLoaded: 1,
    deviceBudgetBytes: null,
    extraDeviceBytes: 0,
    pinned: [],
  });
}

/** A server state that has not started: its one model is loading. */
export function startingState(id = "m"): ServerState {
  return { model: { status: "loading" }, models: unloadableRouter(id), draining: false };
}
