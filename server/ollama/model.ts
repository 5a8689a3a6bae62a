// The one place the Ollama routes get their model: the name a request gives, checked against the
// served model, and the loaded model itself (503 while it loads). Ollama names models "name:tag",
// a name without a tag meaning ":latest", so the served id answers to both forms (and to
// "default", as on /v1); any other name is Ollama's 404, `model "x" not found`.

import { ApiError } from "../openai/errors.ts";
import { type ReadyModel, readyModel, type ServerState } from "../state/server_state.ts";

/** The served model under its Ollama name, and the model itself. */
export interface OllamaModel {
  /** What /api/tags lists and answers carry as `model`. */
  name: string;
  ready: ReadyModel;
}

/** The served model's Ollama name: its id, with ":latest" when the id has no tag. */
export function ollamaName(modelId: string): string {
  return modelId.includes(":") ? modelId : `${modelId}:latest`;
}

/** The model a request names (404 if it is not served, 503 while it loads). */
export function ollamaModel(state: ServerState, modelId: string, requested: string): OllamaModel {
  const name = ollamaName(modelId);
  if (requested !== name && requested !== modelId && requested !== "default") {
    throw new ApiError(404, `model "${requested}" not found`, "model", "model_not_found");
  }
  return { name, ready: readyModel(state) };
}

/** The served model without a request naming it (/api/tags, /api/ps). */
export function servedModel(state: ServerState, modelId: string): OllamaModel {
  return ollamaModel(state, modelId, modelId);
}

/** The served model if it is loaded, else null (/api/ps lists only loaded models). */
export function loadedModel(state: ServerState, modelId: string): OllamaModel | null {
  try {
    return servedModel(state, modelId);
  } catch (err) {
    if (err instanceof ApiError && err.status === 503) return null;
    throw err;
  }
}
