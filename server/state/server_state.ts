// What the routes read of the server's life: whether the model is loading, ready or failed, and
// whether a graceful shutdown has begun. `serve` starts HTTP before the model is loaded, so every
// route that needs the model asks readyModel() and answers 503 until then.

import type { PromptEncoder, Runtime, Tokenizer } from "../../runtime/service.ts";
import { ApiError } from "../openai/errors.ts";
import { redactPaths } from "./redact_paths.ts";

export type ModelState =
  | { status: "loading" }
  | { status: "failed"; error: string }
  | { status: "ready"; runtime: Runtime; tokenizer: Tokenizer; prompts: PromptEncoder };

export interface ServerState {
  model: ModelState;
  /** Set when a graceful shutdown begins (health answers "draining"). */
  draining: boolean;
}

export type ReadyModel = Omit<Extract<ModelState, { status: "ready" }>, "status">;

/** The loaded model, or a 503 saying why there is none. */
export function readyModel(state: ServerState): ReadyModel {
  const s = state.model;
  if (s.status === "ready") return s;
  if (s.status === "loading") {
    throw new ApiError(503, "The model is still loading", null, "model_loading");
  }
  // Like /health: no absolute paths to clients (the server log has the full message).
  throw new ApiError(
    503,
    `The model failed to load: ${redactPaths(s.error)}`,
    null,
    "model_failed",
  );
}
