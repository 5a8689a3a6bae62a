// The HTTP edge: OpenAI-compatible routes over the Engine. Knows HTTP, SSE and the wire format;
// the engine does the rest. createApp is used by `serve` and by the integration tests.

import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { streamSSE } from "hono/streaming";
import type { Context } from "hono";
import type { z } from "zod";
import type { Tokenizer } from "../engine/model/tokenizer.ts";
import { InvalidRequest, Refused, type Runtime, type TokenEvent } from "../runtime/service.ts";
import {
  ApiError,
  chatChunk,
  ChatRequest,
  completionChunk,
  CompletionRequest,
  type FinishReason,
  messageText,
  usage,
  usageChunk,
  zodToApiError,
} from "./openai.ts";
import type { ServerMetrics } from "./server_metrics.ts";
import { TextStream } from "./text_stream.ts";
import { chatLogprobs, completionLogprobs } from "./logprobs.ts";

export interface ServerConfig {
  /** The id clients pass as `model` (also accepted: "default"). */
  modelId: string;
  apiKey?: string;
  /** Most requests waiting for admission; beyond it new requests get 429. */
  maxQueue: number;
  maxBodyBytes: number;
  /** Upper bound on max_tokens. */
  maxTokensLimit: number;
  /** max_tokens when a request gives none: OpenAI's 16 for completions; the context for chat. */
  defaultReadingRate?: number;
  defaultSloTtftMs?: number;
  defaultSloTbtMs?: number;
}

export type EngineState =
  | { status: "loading" }
  | { status: "failed"; error: string }
  | { status: "ready"; runtime: Runtime; tokenizer: Tokenizer };

export interface ServerState {
  engine: EngineState;
  /** Set during graceful shutdown: new requests are refused. */
  draining: boolean;
}

type Kind = "chat" | "completion";

export function createApp(state: ServerState, config: ServerConfig, metrics: ServerMetrics): Hono {
  const app = new Hono();

  /** Errors already counted by a request observer (so onError does not count them twice). */
  const counted = new WeakSet<object>();
  app.onError((err, c) => {
    const apiErr = err instanceof ApiError
      ? err
      : new ApiError(500, err instanceof Error ? err.message : String(err));
    if (!counted.has(err)) metrics.requestFinished(apiErr.status);
    return c.json(apiErr.toJSON(), apiErr.status as 400);
  });
  app.notFound((c) =>
    c.json(
      new ApiError(404, `Unknown route ${c.req.method} ${c.req.path}`, null, "not_found").toJSON(),
      404,
    )
  );

  app.get("/health", (c) => {
    const s = state.engine;
    if (s.status === "ready") {
      return c.json({ status: state.draining ? "draining" : "ready" }, state.draining ? 503 : 200);
    }
    if (s.status === "loading") return c.json({ status: "loading" }, 503);
    return c.json({ status: "failed", error: s.error }, 503);
  });

  app.get("/metrics", (c) => {
    if (state.engine.status === "ready") metrics.observeRuntime(state.engine.runtime);
    return c.text(metrics.render(), 200, {
      "content-type": "text/plain; version=0.0.4; charset=utf-8",
    });
  });

  app.use("/v1/*", async (c, next) => {
    if (config.apiKey && c.req.header("authorization") !== `Bearer ${config.apiKey}`) {
      throw new ApiError(
        401,
        "Missing or invalid API key (send 'Authorization: Bearer <key>')",
        null,
        "invalid_api_key",
        "authentication_error",
      );
    }
    await next();
  });
  app.use(
    "/v1/*",
    bodyLimit({
      maxSize: config.maxBodyBytes,
      onError: () => {
        throw new ApiError(
          413,
          `Request body exceeds ${config.maxBodyBytes} bytes`,
          null,
          "request_too_large",
        );
      },
    }),
  );

  app.get("/v1/models", (c) => {
    const { runtime } = readyEngine(state);
    return c.json({
      object: "list",
      data: [{
        id: config.modelId,
        object: "model",
        created: 0,
        owned_by: "sluice",
        max_model_len: runtime.info.maxContext,
        vocab_size: runtime.info.vocabSize,
      }],
    });
  });

  app.post("/v1/chat/completions", (c) => handle(c, "chat"));
  app.post("/v1/completions", (c) => handle(c, "completion"));

  async function handle(c: Context, kind: Kind): Promise<Response> {
    const engine = readyEngine(state);
    if (state.draining) {
      throw new ApiError(503, "Server is shutting down", null, "shutting_down", "server_error");
    }
    const body = await parseJson(c);
    const schema = kind === "chat" ? ChatRequest : CompletionRequest;
    const parsed = schema.safeParse(body);
    if (!parsed.success) throw zodToApiError(parsed.error);
    const req = parsed.data;
    if (req.model !== config.modelId && req.model !== "default") {
      throw new ApiError(
        404,
        `The model '${req.model}' does not exist; this server serves '${config.modelId}'`,
        "model",
        "model_not_found",
      );
    }
    const tok = engine.tokenizer;
    const ids = kind === "chat"
      ? tok.encodeChat(
        (req as ChatRequest).messages.map((m) => ({
          role: m.role,
          content: messageText(m.content),
        })),
      )
      : promptIds(tok, (req as CompletionRequest).prompt);
    const asked = kind === "chat"
      ? (req as ChatRequest).max_completion_tokens ?? req.max_tokens
      : req.max_tokens;
    const topLogprobs = kind === "chat"
      ? ((req as ChatRequest).logprobs ? (req as ChatRequest).top_logprobs ?? 0 : 0)
      : (req as CompletionRequest).logprobs ?? 0;
    const wantLogprobs = kind === "chat"
      ? !!(req as ChatRequest).logprobs
      : (req as CompletionRequest).logprobs != null;

    const abort = new AbortController();
    c.req.raw.signal?.addEventListener("abort", () => abort.abort(), { once: true });
    let handle;
    try {
      handle = engine.runtime.submit({
        ids,
        maxTokens: asked ?? undefined,
        maxTokensDefault: kind === "chat" ? undefined : 16,
        sampling: {
          temperature: req.temperature ?? 1,
          topK: req.top_k ?? 0,
          topP: req.top_p ?? 1,
          seed: (req.seed ?? Math.floor(Math.random() * 2 ** 31)) >>> 0,
        },
        topLogprobs,
        stopIds: req.ignore_eos ? [] : undefined,
        readingRate: req.reading_rate ?? undefined,
        slo: { ttftMs: req.slo_ttft_ms ?? undefined, tbtMs: req.slo_tbt_ms ?? undefined },
        signal: abort.signal,
      });
    } catch (err) {
      if (err instanceof InvalidRequest) {
        const param = err.param === "messages" && kind !== "chat" ? "prompt" : err.param;
        throw new ApiError(400, err.message, param, err.code);
      }
      if (err instanceof Refused) {
        if (err.code === "shutting_down") {
          throw new ApiError(503, err.message, null, "shutting_down", "server_error");
        }
        c.header("Retry-After", String(err.retryAfterS));
        throw new ApiError(429, err.message, null, "rate_limit_exceeded", "rate_limit_error");
      }
      throw err;
    }
    const arrived = performance.now();
    const pacer = handle.tokens;
    const stops = req.stop == null ? [] : typeof req.stop === "string" ? [req.stop] : req.stop;
    const text = new TextStream(tok, stops);
    const id = (kind === "chat" ? "chatcmpl-" : "cmpl-") + crypto.randomUUID().replaceAll("-", "");
    const created = Math.floor(Date.now() / 1000);
    const model = config.modelId;
    const observer = metrics.requestStarted(arrived);

    /** Runs the paced stream, calling `emit` per piece; returns the finish reason. */
    const play = async (
      emit: (piece: { text: string; tokens: TokenEvent[] }) => Promise<void>,
    ): Promise<FinishReason> => {
      for await (const ev of pacer) {
        observer.token();
        const piece = text.push(ev);
        if (piece.text || piece.tokens.length) await emit(piece);
        if (text.stopped) {
          handle.cancel(); // the runtime frees the request at its next step
          return "stop";
        }
      }
      const rest = text.flush();
      if (rest.text || rest.tokens.length) await emit(rest);
      const finish = await handle.done;
      switch (finish.reason) {
        case "stop":
        case "length":
          return finish.reason;
        case "error":
          throw new ApiError(500, finish.error ?? "generation failed");
        case "shutdown":
          throw new ApiError(
            503,
            "The server shut down before the response was complete",
            null,
            "server_shutdown",
            "server_error",
          );
        case "cancelled":
          throw new ApiError(499, "The client closed the request", null, "client_closed");
      }
    };
    const completionTokens = () => observer.tokens;

    if (!req.stream) {
      let all = "";
      const tokens: TokenEvent[] = [];
      try {
        const finish = await play((p) => {
          all += p.text;
          tokens.push(...p.tokens);
          return Promise.resolve();
        });
        observer.finish(abort.signal.aborted ? 499 : 200);
        const u = usage(ids.length, completionTokens());
        if (kind === "chat") {
          return c.json({
            id,
            object: "chat.completion",
            created,
            model,
            system_fingerprint: "sluice",
            choices: [{
              index: 0,
              message: { role: "assistant", content: all },
              logprobs: wantLogprobs ? { content: chatLogprobs(text, tokens) } : null,
              finish_reason: finish,
            }],
            usage: u,
          });
        }
        return c.json({
          id,
          object: "text_completion",
          created,
          model,
          system_fingerprint: "sluice",
          choices: [{
            index: 0,
            text: all,
            logprobs: wantLogprobs ? completionLogprobs(text, tokens, 0) : null,
            finish_reason: finish,
          }],
          usage: u,
        });
      } catch (err) {
        observer.finish(err instanceof ApiError ? err.status : 500);
        if (err instanceof Object) counted.add(err);
        throw err;
      } finally {
        handle.cancel();
        metrics.recordStall(handle.bufferStats().stallMs / 1000);
      }
    }

    const includeUsage = !!req.stream_options?.include_usage;
    return streamSSE(c, async (sse) => {
      sse.onAbort(() => handle.cancel());
      const send = (obj: unknown) => sse.writeSSE({ data: JSON.stringify(obj) });
      try {
        let offset = 0;
        if (kind === "chat") {
          await send(chatChunk(id, created, model, { role: "assistant", content: "" }, null));
        }
        const finish = await play(async (p) => {
          if (kind === "chat") {
            await send(
              chatChunk(
                id,
                created,
                model,
                { content: p.text },
                null,
                wantLogprobs ? chatLogprobs(text, p.tokens) : null,
              ),
            );
          } else {
            await send(
              completionChunk(
                id,
                created,
                model,
                p.text,
                null,
                wantLogprobs ? completionLogprobs(text, p.tokens, offset) : null,
                p.tokens.map((t) => t.id),
              ),
            );
          }
          offset += p.text.length;
        });
        await send(
          kind === "chat"
            ? chatChunk(id, created, model, {}, finish)
            : completionChunk(id, created, model, "", finish),
        );
        if (includeUsage) {
          await send(
            usageChunk(
              id,
              created,
              model,
              kind === "chat" ? "chat.completion.chunk" : "text_completion",
              usage(ids.length, completionTokens()),
            ),
          );
        }
        await sse.writeSSE({ data: "[DONE]" });
        observer.finish(sse.aborted ? 499 : 200);
      } catch (err) {
        const apiErr = err instanceof ApiError
          ? err
          : new ApiError(500, err instanceof Error ? err.message : String(err));
        observer.finish(sse.aborted ? 499 : apiErr.status);
        if (!sse.aborted) {
          await sse.writeSSE({ data: JSON.stringify(apiErr.toJSON()) }).catch(() => {});
        }
      } finally {
        handle.cancel();
        metrics.recordStall(handle.bufferStats().stallMs / 1000);
      }
    });
  }

  return app;
}

function readyEngine(state: ServerState): { runtime: Runtime; tokenizer: Tokenizer } {
  const s = state.engine;
  if (s.status === "ready") return s;
  if (s.status === "loading") {
    throw new ApiError(503, "The model is still loading", null, "model_loading", "server_error");
  }
  throw new ApiError(
    503,
    `The model failed to load: ${s.error}`,
    null,
    "model_failed",
    "server_error",
  );
}

async function parseJson(c: Context): Promise<unknown> {
  const type = c.req.header("content-type") ?? "";
  if (!type.includes("application/json")) {
    throw new ApiError(400, "Content-Type must be application/json", null, "invalid_content_type");
  }
  try {
    return await c.req.json();
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw new ApiError(400, "The request body is not valid JSON", null, "invalid_json");
  }
}

function promptIds(
  tok: Tokenizer,
  prompt: z.infer<typeof CompletionRequest>["prompt"],
): number[] {
  const one = Array.isArray(prompt) ? prompt[0] : prompt;
  if (typeof one === "string") return tok.encode(one);
  return (Array.isArray(prompt[0]) ? prompt[0] : prompt) as number[];
}
