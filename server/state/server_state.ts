// What the routes read of the server's life: whether it has started (its first models loaded),
// failed to, or is draining for shutdown, and the model router (runtime/model_router.ts) that
// holds every model it serves. `serve` starts HTTP before the start-up models are loaded, so until
// then every route that needs a model answers 503 (health says "loading"); once started, a request
// for a model that is not loaded waits for its load.

import {
  type ChatParts,
  type Embedder,
  type LoadedModel,
  type ModelKind,
  ModelRouter,
  ModelUnavailable,
  type Reranker,
  UnknownModel,
} from "../../runtime/model_router.ts";
import { InvalidRequest } from "../../runtime/service.ts";
import { ApiError, shuttingDown } from "../openai/errors.ts";
import { redactPaths } from "./redact_paths.ts";

export type StartupState =
  | { status: "loading" }
  | { status: "failed"; error: string }
  | { status: "ready" };

export interface ServerState {
  model: StartupState;
  models: ModelRouter;
  /** Set when a graceful shutdown begins (health answers "draining"). */
  draining: boolean;
}

/** A model held for one request (release once the request is in the model's hands). */
export interface ServedModel {
  id: string;
  model: LoadedModel;
  release(): void;
}

/** 503 while the server starts or after its start failed; nothing otherwise. */
export function checkStarted(state: ServerState): void {
  const s = state.model;
  if (s.status === "ready") return;
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

/** The id a request's `model` names (404 naming the served ids if none). */
export function modelIdOf(state: ServerState, requested: string | null | undefined): string {
  try {
    return state.models.idOf(requested);
  } catch (err) {
    throw apiErrorOf(err);
  }
}

/** The model a request names, loaded: waits for its load; 404 unknown, 503 when it cannot load. */
export async function modelFor(
  state: ServerState,
  requested: string | null | undefined,
  keepAliveMs?: number,
): Promise<ServedModel> {
  checkStarted(state);
  if (state.draining) throw shuttingDown();
  try {
    return await state.models.acquire(requested, { keepAliveMs });
  } catch (err) {
    throw apiErrorOf(err);
  }
}

/**
 * Whether a stream for this name must wait for a load (the route then starts its stream at once,
 * server/sse/while_loading.ts). False for a name that is not served: the usual path answers 404.
 */
export function mustLoad(state: ServerState, requested: string | null | undefined): boolean {
  if (state.model.status !== "ready" || state.draining) return false;
  try {
    return !state.models.isLoaded(requested);
  } catch {
    return false;
  }
}

/** A chat model's parts; 400 naming the kind of a model that only scores. */
export function chatPartsOf(served: ServedModel): ChatParts {
  if (served.model.chat) return served.model.chat;
  served.release();
  throw new ApiError(
    400,
    `The model '${served.id}' is ${kindName(served.model.kind)}; it cannot generate text`,
    "model",
    "model_not_supported",
  );
}

/** Runs `use` with the chat model a request names, releasing it when `use` has returned. */
export async function withChatModel<T>(
  state: ServerState,
  requested: string | null | undefined,
  use: (chat: ChatParts, id: string) => Promise<T> | T,
  keepAliveMs?: number,
): Promise<T> {
  const served = await modelFor(state, requested, keepAliveMs);
  const chat = chatPartsOf(served);
  try {
    return await use(chat, served.id);
  } finally {
    served.release();
  }
}

/** Runs `use` with the embedder of the model a request names (400 naming a model that has none). */
export function withEmbedder<T>(
  state: ServerState,
  requested: string | null | undefined,
  use: (embedder: Embedder, id: string) => Promise<T>,
  keepAliveMs?: number,
): Promise<T> {
  return withScorer(state, requested, "embedder", use, keepAliveMs);
}

/** Runs `use` with the reranker of the model a request names (400 naming a model that has none). */
export function withReranker<T>(
  state: ServerState,
  requested: string | null | undefined,
  use: (reranker: Reranker, id: string) => Promise<T>,
  keepAliveMs?: number,
): Promise<T> {
  return withScorer(state, requested, "reranker", use, keepAliveMs);
}

async function withScorer<K extends "embedder" | "reranker", T>(
  state: ServerState,
  requested: string | null | undefined,
  part: K,
  use: (scorer: NonNullable<LoadedModel[K]>, id: string) => Promise<T>,
  keepAliveMs?: number,
): Promise<T> {
  const served = await modelFor(state, requested, keepAliveMs);
  try {
    const scorer = served.model[part];
    if (!scorer) {
      const what = part === "embedder" ? "embeddings" : "relevance scores";
      const kind = served.model.kind === "chat"
        ? "a chat model with no pooling config (sentence-transformers' modules.json)"
        : kindName(served.model.kind);
      throw new ApiError(
        400,
        `The model '${served.id}' is ${kind}; it cannot serve ${what}`,
        "model",
        "model_not_supported",
      );
    }
    return await use(scorer as NonNullable<LoadedModel[K]>, served.id);
  } catch (err) {
    if (err instanceof InvalidRequest) throw new ApiError(400, err.message, err.param, err.code);
    throw err;
  } finally {
    served.release();
  }
}

export function kindName(kind: ModelKind): string {
  return kind === "chat"
    ? "a chat model"
    : kind === "embedding"
    ? "an embedding model"
    : "a reranking model";
}

function apiErrorOf(err: unknown): unknown {
  if (err instanceof UnknownModel) {
    return new ApiError(404, err.message, "model", "model_not_found");
  }
  if (err instanceof ModelUnavailable) {
    return new ApiError(
      503,
      `The model '${err.id}' could not be loaded: ${redactPaths(err.message)}`,
      "model",
      err.reason === "no_room" ? "model_no_room" : "model_failed",
    );
  }
  return err;
}
