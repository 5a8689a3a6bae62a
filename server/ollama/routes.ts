// The Ollama API under /api: version, tags, ps, show, chat and generate over the router's models
// (a request's keep_alive is the model's keep-alive from then on; an empty chat or generate loads
// the model, or with keep_alive 0 unloads it, as Ollama does), and Ollama's model-management verbs
// answered 501 (Sluice has no registry and builds no models).
// Answers are Ollama's, errors too (app.ts answers /api in errors.ts's shape), with the /v1
// middleware (request counting, API key, body deadline and limit) in front of each route. Chat
// runs as a chat turn (agent/chat_run.ts, as /v1/chat/completions), generate as a text run
// (generate_run.ts); both are answered as NDJSON or one object (respond.ts). /api/embed and
// /api/embeddings take the model's embedder, as /v1/embeddings does.

import { type Context, Hono } from "hono";
import { type ChatContext, startChat } from "../agent/chat_run.ts";
import { chatBody } from "../agent/chat_body.ts";
import { turnPrompt } from "../agent/chat_prompt.ts";
import type { TurnRouteConfig } from "../agent/start_turn.ts";
import { promptIds } from "../completions/kinds.ts";
import type { ServerMetrics } from "../metrics/server_metrics.ts";
import { apiKey } from "../middleware/api_key.ts";
import { bodyDeadline } from "../middleware/body_deadline.ts";
import { limitBody } from "../middleware/body_limit.ts";
import { countRequests, type ObservedEnv } from "../middleware/count_requests.ts";
import { parseBody } from "../openai/body.ts";
import type { ChatRequest } from "../openai/schemas.ts";
import { answerWrongMethods } from "../routes/method_not_allowed.ts";
import { modelFor, type ServerState, withEmbedder } from "../state/server_state.ts";
import { limitToContext } from "./context_limit.ts";
import { notImplemented } from "./errors.ts";
import { startGenerate } from "./generate_run.ts";
import { listed, OLLAMA_API_VERSION, running, shown, shownScorer } from "./model_info.ts";
import { keepAliveOf, ollamaId, type OllamaModel, ollamaModel, ollamaName } from "./model.ts";
import type { KeepAlive } from "./keep_alive.ts";
import { chatReply } from "./reply.ts";
import { respondOllama } from "./respond.ts";
import {
  OllamaChatRequest,
  OllamaEmbeddingsRequest,
  OllamaEmbedRequest,
  OllamaGenerateRequest,
  OllamaShowRequest,
} from "./schema.ts";
import { MAX_REQUEST_TOKENS } from "../embeddings/routes.ts";
import { withDimensions } from "../embeddings/vectors.ts";
import { toChat } from "./to_chat.ts";
import { chatWire, generateWire, loadedAnswer } from "./wire.ts";

export interface OllamaRouteConfig extends TurnRouteConfig {
  metrics: ServerMetrics;
  apiKey?: string;
  maxBodyBytes: number;
  bodyTimeoutMs?: number;
}

const NOT_HERE = "Sluice serves the models it was started with (--model)";

/** Ollama reads any body as JSON, and its docs' `curl -d` sends form encoding: so does /api. */
const ANY_MEDIA_TYPE = { anyMediaType: true };

export function ollamaRoutes(state: ServerState, config: OllamaRouteConfig): Hono<ObservedEnv> {
  const startedAt = new Date();
  const app = new Hono<ObservedEnv>();
  const paths = ["version", "tags", "ps", "show", "chat", "generate", "embed", "embeddings"];
  const refused = ["pull", "push", "create", "copy", "delete", "blobs/*"];
  for (const path of [...paths, ...refused]) {
    app.use(
      `/${path}`,
      countRequests(config.metrics),
      apiKey(config.apiKey),
      bodyDeadline(config.bodyTimeoutMs),
      limitBody(config.maxBodyBytes),
    );
  }

  /** What a turn needs, from the model a request names. */
  const turnContext = (c: Context<ObservedEnv>, model: OllamaModel): ChatContext => {
    c.get("observer").model(model.served.id);
    return {
      ...model.chat,
      modelId: model.name,
      observer: c.get("observer"),
      live: config.live,
      reasoningInline: config.reasoningInline,
    };
  };
  const abortWith = (c: Context) => {
    const abort = new AbortController();
    c.req.raw.signal.addEventListener("abort", () => abort.abort(), { once: true });
    return abort;
  };

  app.get("/version", (c) => c.json({ version: OLLAMA_API_VERSION }));
  const loadedChats = () => new Map(state.models.loaded().map(({ id, model }) => [id, model.chat]));
  app.get("/tags", (c) => {
    const loaded = loadedChats();
    const models = state.models.list().map((m) => listed(m, loaded.get(m.id) ?? null, startedAt));
    return c.json({ models });
  });
  app.get("/ps", (c) => {
    const loaded = loadedChats();
    const models = state.models.list().filter((m) => loaded.has(m.id));
    return c.json({ models: models.map((m) => running(m, loaded.get(m.id) ?? null)) });
  });
  app.post("/show", async (c) => {
    const body = await parseBody(c, OllamaShowRequest, ANY_MEDIA_TYPE);
    const served = await modelFor(state, ollamaId(state, (body.model ?? body.name)!));
    try {
      const name = ollamaName(served.id);
      const { chat, kind } = served.model;
      return c.json(chat ? shown(name, chat, startedAt) : shownScorer(name, kind, startedAt));
    } finally {
      served.release();
    }
  });

  /** An empty chat or generate: load the model, or with keep_alive 0 unload it. */
  const loadOrUnload = async (requested: string, keepAlive: KeepAlive | null | undefined) => {
    if (keepAliveOf(keepAlive) === 0) {
      const id = ollamaId(state, requested);
      await state.models.unload(id);
      return { name: ollamaName(id), reason: "unload" as const };
    }
    const model = await ollamaModel(state, requested, keepAlive);
    model.served.release();
    return { name: model.name, reason: "load" as const };
  };

  /** Runs a request on the model it names, released once the request is in the model's hands. */
  const onModel = async <T>(
    requested: string,
    keepAlive: KeepAlive | null | undefined,
    use: (model: OllamaModel) => Promise<T>,
  ) => {
    const model = await ollamaModel(state, requested, keepAlive);
    try {
      return await use(model);
    } finally {
      model.served.release();
    }
  };

  app.post("/chat", async (c) => {
    const body = await parseBody(c, OllamaChatRequest, ANY_MEDIA_TYPE);
    if (body.messages.length === 0) {
      const { name, reason } = await loadOrUnload(body.model, body.keep_alive);
      return c.json(loadedAnswer(name, "chat", reason));
    }
    return await onModel(body.model, body.keep_alive, async (model) => {
      const ctx = turnContext(c, model);
      const chat = await withinContext(ctx, chatBody(toChat(body)), body.options?.num_ctx);
      const abort = abortWith(c);
      const reply = chatReply(await startChat(ctx, chat, abort.signal));
      return respondOllama(c, {
        reply,
        wire: chatWire(model.name),
        stream: body.stream ?? true,
        abort,
        observer: ctx.observer,
      });
    });
  });

  app.post("/generate", async (c) => {
    const body = await parseBody(c, OllamaGenerateRequest, ANY_MEDIA_TYPE);
    if (body.prompt === "" && !body.context?.length) {
      const { name, reason } = await loadOrUnload(body.model, body.keep_alive);
      return c.json(loadedAnswer(name, "generate", reason));
    }
    return await onModel(body.model, body.keep_alive, async (model) => {
      const ctx = turnContext(c, model);
      const abort = abortWith(c);
      const reply = await startGenerate(ctx, body, abort.signal);
      return respondOllama(c, {
        reply,
        wire: generateWire(model.name),
        stream: body.stream ?? true,
        abort,
        observer: ctx.observer,
      });
    });
  });

  // Embeddings: /api/embed (a batch, truncated to the context unless truncate is false) and the
  // older /api/embeddings (one prompt). Vectors are the model's, pooled and normalised as its
  // files say (Ollama's older endpoint returned them unnormalised).
  app.post("/embed", async (c) => {
    const started = performance.now();
    const body = await parseBody(c, OllamaEmbedRequest, ANY_MEDIA_TYPE);
    const keepAlive = keepAliveOf(body.keep_alive);
    const requested = ollamaId(state, body.model);
    return await withEmbedder(state, requested, async (embedder, id) => {
      const loaded = performance.now();
      const inputs = typeof body.input === "string" ? [body.input] : body.input;
      const out = await embedder.embed(inputs, {
        truncate: body.truncate,
        maxTotalTokens: MAX_REQUEST_TOKENS,
      });
      const vectors = withDimensions(embedder, out.vectors, body.dimensions);
      const ns = (ms: number) => Math.round(ms * 1e6);
      return c.json({
        model: ollamaName(id),
        embeddings: vectors.map((v) => Array.from(v)),
        total_duration: ns(performance.now() - started),
        load_duration: ns(loaded - started),
        prompt_eval_count: out.promptTokens,
      });
    }, keepAlive);
  });
  app.post("/embeddings", async (c) => {
    const body = await parseBody(c, OllamaEmbeddingsRequest, ANY_MEDIA_TYPE);
    const requested = ollamaId(state, body.model);
    return await withEmbedder(state, requested, async (embedder) => {
      // An empty prompt loads the model and answers an empty vector, as Ollama does.
      if (body.prompt === "") return c.json({ embedding: [] });
      const out = await embedder.embed([body.prompt], { truncate: true });
      return c.json({ embedding: Array.from(out.vectors[0]) });
    }, keepAliveOf(body.keep_alive));
  });

  app.post("/pull", () => {
    throw notImplemented("Pulling a model", `${NOT_HERE}; it has no network registry`);
  });
  app.post("/push", () => {
    throw notImplemented("Pushing a model", `${NOT_HERE}; it has no network registry`);
  });
  app.post("/create", () => {
    throw notImplemented("Creating a model", `${NOT_HERE}; it builds no models from Modelfiles`);
  });
  app.post("/copy", () => {
    throw notImplemented("Copying a model", `${NOT_HERE}; its models have no aliases to copy`);
  });
  app.delete("/delete", () => {
    throw notImplemented("Deleting a model", `${NOT_HERE}; it never deletes model files`);
  });
  app.on(["HEAD", "POST"], "/blobs/*", () => {
    throw notImplemented("Uploading blobs", `${NOT_HERE}; it builds no models from blobs`);
  });
  answerWrongMethods(app); // a known path with a wrong method: 405 in Ollama's shape
  return app;
}

/** A chat within num_ctx: its answer capped to the room the prompt leaves. */
async function withinContext(
  ctx: ChatContext,
  chat: ChatRequest,
  numCtx: number | undefined,
): Promise<ChatRequest> {
  if (numCtx === undefined) return chat;
  const ids = await promptIds(ctx.prompts, turnPrompt(ctx.tokenizer, chat));
  const maxTokens = limitToContext(
    numCtx,
    ctx.runtime.info.maxContext,
    ids.length,
    chat.max_tokens ?? undefined,
  );
  return { ...chat, max_tokens: maxTokens };
}
