// The models `serve` offers, as a model router: each --model resolved to local files before the
// port opens (a download happens now, never inside a request; with no --model, the default hub
// model or the demo model, as before), the catalog of --models-dir and what Hugging Face's tools
// and Ollama put on this machine, and the router's limits. The first --model (or, with none, the
// default model unless --models-dir gives the models) is loaded at start; the rest on demand.
// Every model is opened with the same engine and runtime options: --gpu-kv-mb and --host-kv-mb
// are each model's own budgets, not split between models.

import { catalogModels, modelArgSource } from "../engine/sources/model_catalog.ts";
import { chooseModel } from "../engine/sources/default_model.ts";
import { resolveModel } from "../engine/sources/resolve.ts";
import { ModelRouter } from "./model_router.ts";
import { type OpenOptions, openServedModel } from "./open.ts";

/** The serve flags that say which models are served and how long they stay. */
export interface ModelFlags {
  model?: string[];
  "models-dir"?: string;
  "discover-models": "on" | "off";
  "keep-alive": number;
  "max-loaded": number;
  "models-memory-mb"?: number;
  pin?: string[];
  "gpu-kv-mb"?: number;
}

export interface ServedModels {
  router: ModelRouter;
  /** Ids loaded before the server says ready. */
  preload: string[];
}

export async function servedModels(
  flags: ModelFlags,
  options: OpenOptions,
  log: (msg: string) => void,
): Promise<ServedModels> {
  const args = flags.model ?? [];
  const models: { arg: string; dir: string }[] = [];
  if (args.length === 0 && flags["models-dir"] === undefined) {
    const chosen = await chooseModel(undefined, log);
    models.push({ arg: chosen.id, dir: chosen.dir });
  }
  for (const arg of args) {
    models.push({ arg, dir: await resolveModel(modelArgSource(arg), log) });
  }
  const entries = await catalogModels({
    models,
    modelsDir: flags["models-dir"],
    discover: flags["discover-models"] === "on",
  });
  if (entries.length === 0) {
    throw new Error(`no models to serve: --models-dir ${flags["models-dir"]} holds none`);
  }
  const router = new ModelRouter(entries, {
    open: (entry) => openServedModel(entry.source, options, log),
    keepAliveMs: flags["keep-alive"],
    maxLoaded: flags["max-loaded"],
    deviceBudgetBytes: flags["models-memory-mb"] === undefined
      ? null
      : flags["models-memory-mb"] * 2 ** 20,
    extraDeviceBytes: (flags["gpu-kv-mb"] ?? 0) * 2 ** 20,
    pinned: flags.pin ?? [],
    log,
  });
  if (entries.length > 1) {
    log(`sluice: ${entries.length} models: ${entries.map((e) => e.id).join(", ")}`);
  }
  return { router, preload: models.length > 0 ? [entries[0].id] : [] };
}
