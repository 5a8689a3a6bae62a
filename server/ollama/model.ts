// The one place the Ollama routes get their model, through the server's model router: Ollama names
// models "name:tag", a name without a tag meaning ":latest", so each id answers to both forms (the
// router's idOf), and an unknown name is Ollama's 404, `model "x" not found`. A request's
// keep_alive becomes the model's keep-alive from then on, as Ollama keeps it.

import type { ChatParts } from "../../runtime/model_router.ts";
import { ApiError } from "../openai/errors.ts";
import {
  chatPartsOf,
  modelFor,
  modelIdOf,
  type ServedModel,
  type ServerState,
} from "../state/server_state.ts";
import type { KeepAlive } from "./keep_alive.ts";

/** A chat model held for one Ollama request, under its Ollama name. */
export interface OllamaModel {
  /** What /api/tags lists and answers carry as `model`. */
  name: string;
  chat: ChatParts;
  served: ServedModel;
}

/** A model's Ollama name: its id, with ":latest" when the id has no tag. */
export function ollamaName(modelId: string): string {
  return modelId.includes(":") ? modelId : `${modelId}:latest`;
}

/** The router's keep-alive for a request's keep_alive (absent: the model's own). */
export function keepAliveOf(keepAlive: KeepAlive | null | undefined): number | undefined {
  if (keepAlive == null) return undefined;
  return keepAlive.ms ?? Infinity;
}

/** The id a request names, as Ollama answers an unknown one. */
export function ollamaId(state: ServerState, requested: string): string {
  try {
    return modelIdOf(state, requested);
  } catch (err) {
    throw notFound(err, requested);
  }
}

/** The chat model a request names, loaded (404 if it is not served, 400 if it does not chat). */
export async function ollamaModel(
  state: ServerState,
  requested: string,
  keepAlive?: KeepAlive | null,
): Promise<OllamaModel> {
  let served: ServedModel;
  try {
    served = await modelFor(state, requested, keepAliveOf(keepAlive));
  } catch (err) {
    throw notFound(err, requested);
  }
  return { name: ollamaName(served.id), chat: chatPartsOf(served), served };
}

function notFound(err: unknown, requested: string): unknown {
  if (err instanceof ApiError && err.status === 404) {
    return new ApiError(404, `model "${requested}" not found`, "model", "model_not_found");
  }
  return err;
}
