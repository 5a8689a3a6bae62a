// The HTTP edge: an OpenAI-compatible Hono app over the runtime. This file only assembles it: the
// error envelope, the header limit, the Host and Origin checks (every route), the middleware on the
// API (/v1, /tokenize, /detokenize: request counting, API key, body deadline and limit), the key on
// /state (and /metrics with metricsAuth), the routes in server/routes/ (/v1/messages answering in
// Anthropic's error envelope), server/ollama/'s under /api (in Ollama's), and 405 for a known path
// asked with a wrong method. createApp is used by `serve` and by the tests; connections (timeouts,
// limits, framing) are server/connections/'s, in front of it.

import { type Context, Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ServerMetrics } from "./metrics/server_metrics.ts";
import { apiKey } from "./middleware/api_key.ts";
import { bodyDeadline } from "./middleware/body_deadline.ts";
import { limitBody } from "./middleware/body_limit.ts";
import { countRequests, type ObservedEnv } from "./middleware/count_requests.ts";
import { crossOrigin } from "./middleware/cross_origin.ts";
import { limitHeaders } from "./middleware/header_limit.ts";
import { checkHost, hostPolicy } from "./middleware/host_check.ts";
import { LiveRequests } from "./completions/live_requests.ts";
import { anthropicError, isMessagesPath } from "./messages/errors.ts";
import { ApiError } from "./openai/errors.ts";
import { completionsRoutes } from "./routes/completions.ts";
import { healthAtTheDoor, healthRoutes } from "./routes/health.ts";
import { answerWrongMethods } from "./routes/method_not_allowed.ts";
import { messagesRoutes } from "./routes/messages.ts";
import { metricsRoutes } from "./routes/metrics.ts";
import { modelsRoutes } from "./routes/models.ts";
import { isOllamaPath, ollamaError } from "./ollama/errors.ts";
import { ollamaRoutes } from "./ollama/routes.ts";
import { playgroundRoutes } from "./routes/playground.ts";
import { requestsRoutes } from "./routes/requests.ts";
import { responsesRoutes } from "./routes/responses.ts";
import { stateRoutes } from "./routes/state.ts";
import { tokenizeRoutes } from "./routes/tokenize.ts";
import { embeddingsRoutes } from "./embeddings/routes.ts";
import type { ServerState } from "./state/server_state.ts";

export interface ServerConfig {
  apiKey?: string;
  maxBodyBytes: number;
  /** How long a client may take to send a request body (default BODY_TIMEOUT_MS); then 408. */
  bodyTimeoutMs?: number;
  /** The address the server listens on (default 127.0.0.1); Host headers must name it. */
  bindHost?: string;
  /** More names the Host header may have (--allowed-hosts; "*": any). */
  allowedHosts?: string[];
  /** Web pages, besides the server's own, that may call it (--cors-origins; "*": any). */
  corsOrigins?: string[];
  /** With an API key: require it on /metrics too (Prometheus can send it as a bearer token). */
  metricsAuth?: boolean;
  /** Ms of silence after which a stream sends an SSE comment (default SSE_KEEPALIVE_MS, server/sse/keep_alive.ts). */
  sseKeepAliveMs?: number;
  /** --reasoning-format none: <think> text stays in the answer unless a request asks otherwise. */
  reasoningInline?: boolean;
}

/** The Host names this server answers to (its address, and --allowed-hosts). */
function hostsOf(config: ServerConfig) {
  return hostPolicy(config.bindHost ?? "127.0.0.1", config.allowedHosts);
}

/**
 * What the front door answers itself for this app (FrontDoorOptions.answerHere): plain health
 * probes, with the same answer and the same Host policy as the app's /health route.
 */
export function doorAnswers(state: ServerState, config: ServerConfig) {
  return healthAtTheDoor(state, hostsOf(config));
}

export function createApp(
  state: ServerState,
  config: ServerConfig,
  metrics: ServerMetrics,
): Hono<ObservedEnv> {
  const app = new Hono<ObservedEnv>();
  // Anthropic's clients read Anthropic's envelope (every answer under /v1/messages has it), Ollama's
  // its {"error"} (every answer under /api).
  const envelope = (c: Context, e: ApiError) =>
    isMessagesPath(c.req.path)
      ? anthropicError(e)
      : isOllamaPath(c.req.path)
      ? ollamaError(e)
      : e.toJSON();
  app.onError((err, c) => {
    const e = ApiError.from(err);
    return c.json(envelope(c, e), e.status as ContentfulStatusCode, e.headers);
  });
  app.notFound((c) => {
    const e = new ApiError(404, `Unknown route ${c.req.method} ${c.req.path}`, null, "not_found");
    return c.json(envelope(c, e), 404);
  });
  app.use("*", limitHeaders());
  app.use(
    "*",
    checkHost(hostsOf(config)),
    crossOrigin(config.corsOrigins),
  );
  for (const api of ["/v1/*", "/tokenize", "/detokenize", "/rerank", "/v2/rerank", "/reranking"]) {
    app.use(
      api,
      countRequests(metrics),
      apiKey(config.apiKey),
      bodyDeadline(config.bodyTimeoutMs),
      limitBody(config.maxBodyBytes),
    );
  }
  // /state lists every request's buffers and timings: behind the key whenever there is one.
  app.use("/state", apiKey(config.apiKey));
  if (config.metricsAuth) app.use("/metrics", apiKey(config.apiKey));
  app.route("/", healthRoutes(state));
  app.route("/", metricsRoutes(state, metrics));
  app.route("/", stateRoutes(state, metrics));
  app.route("/", playgroundRoutes());
  app.route("/v1", modelsRoutes(state));
  const live = new LiveRequests();
  const turns = {
    live,
    sseKeepAliveMs: config.sseKeepAliveMs,
    reasoningInline: config.reasoningInline,
  };
  app.route("/v1", completionsRoutes(state, turns));
  app.route("/v1", responsesRoutes(state, turns));
  app.route("/v1", messagesRoutes(state, turns));
  app.route("/v1", requestsRoutes(live));
  app.route("/", tokenizeRoutes(state));
  app.route("/", embeddingsRoutes(state));
  app.route("/api", ollamaRoutes(state, { ...turns, ...config, metrics }));
  answerWrongMethods(app); // last: it covers the routes mounted above
  return app;
}
