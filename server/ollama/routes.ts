// The Ollama API under /api: version, tags, ps, show, chat and generate over the served model,
// and Ollama's model-management verbs answered 501 (Sluice has no registry and builds no models).
// Answers are Ollama's, errors too (app.ts answers /api in errors.ts's shape), with the /v1
// middleware (request counting, API key, body deadline and limit) in front of each route. Chat
// runs as a chat turn (agent/chat_run.ts, as /v1/chat/completions), generate as a text run
// (generate_run.ts); both are answered as NDJSON or one object (respond.ts). The embeddings routes
// are not here.

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
import type { ServerState } from "../state/server_state.ts";
import { limitToContext } from "./context_limit.ts";
import { notImplemented } from "./errors.ts";
import { startGenerate } from "./generate_run.ts";
import { listed, OLLAMA_API_VERSION, running, shown } from "./model_info.ts";
import { loadedModel, type OllamaModel, ollamaModel, servedModel } from "./model.ts";
import { chatReply } from "./reply.ts";
import { respondOllama } from "./respond.ts";
import { OllamaChatRequest, OllamaGenerateRequest, OllamaShowRequest } from "./schema.ts";
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
  const { modelId } = config;
  const app = new Hono<ObservedEnv>();
  const paths = ["version", "tags", "ps", "show", "chat", "generate"];
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
  const turnContext = (c: Context<ObservedEnv>, model: OllamaModel): ChatContext => ({
    ...model.ready,
    modelId: model.name,
    observer: c.get("observer"),
    live: config.live,
    reasoningInline: config.reasoningInline,
  });
  const abortWith = (c: Context) => {
    const abort = new AbortController();
    c.req.raw.signal.addEventListener("abort", () => abort.abort(), { once: true });
    return abort;
  };

  app.get("/version", (c) => c.json({ version: OLLAMA_API_VERSION }));
  app.get("/tags", (c) => c.json({ models: [listed(servedModel(state, modelId), startedAt)] }));
  app.get("/ps", (c) => {
    const model = loadedModel(state, modelId);
    return c.json({ models: model ? [running(model)] : [] });
  });
  app.post("/show", async (c) => {
    const body = await parseBody(c, OllamaShowRequest, ANY_MEDIA_TYPE);
    return c.json(shown(ollamaModel(state, modelId, (body.model ?? body.name)!), startedAt));
  });

  app.post("/chat", async (c) => {
    const body = await parseBody(c, OllamaChatRequest, ANY_MEDIA_TYPE);
    const model = ollamaModel(state, modelId, body.model);
    if (body.messages.length === 0) return c.json(loadedAnswer(model.name, "chat"));
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

  app.post("/generate", async (c) => {
    const body = await parseBody(c, OllamaGenerateRequest, ANY_MEDIA_TYPE);
    const model = ollamaModel(state, modelId, body.model);
    if (body.prompt === "" && !body.context?.length) {
      return c.json(loadedAnswer(model.name, "generate"));
    }
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
