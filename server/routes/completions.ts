// POST /v1/chat/completions and /v1/completions. Completions: parse the body, build the request,
// submit it, answer as a stream or as one JSON response (completions/kinds.ts says what is the
// endpoint's own). Chat: the turn runs through the agent path that the Responses and Messages APIs
// share (agent/chat_run.ts), which reads tool calls and reasoning out of the text; its answer is
// written from the turn's events (agent/respond_chat.ts).

import { type Context, Hono } from "hono";
import { buildRequest } from "../completions/build.ts";
import { chat, completion, type Endpoint } from "../completions/kinds.ts";
import { respondJson } from "../completions/respond_json.ts";
import { respondSse } from "../completions/respond_sse.ts";
import { checkPromptLength, submit } from "../completions/submit.ts";
import type { ObservedEnv } from "../middleware/count_requests.ts";
import { parseBody } from "../openai/body.ts";
import { ChatRequest, type SharedFields } from "../openai/schemas.ts";
import { startChoices } from "../agent/chat_run.ts";
import type { TurnRouteConfig } from "../agent/start_turn.ts";
import { respondChatJson, respondChatSse } from "../agent/respond_chat.ts";
import { tokenNames } from "../openai/logprobs.ts";
import { mustLoad, type ServerState, withChatModel } from "../state/server_state.ts";
import { streamWhileLoading } from "../sse/while_loading.ts";
import type { ChatParts } from "../../runtime/model_router.ts";

export function completionsRoutes(
  state: ServerState,
  route: TurnRouteConfig,
): Hono<ObservedEnv> {
  const { live, sseKeepAliveMs, reasoningInline } = route;
  async function complete<B extends SharedFields>(c: Context<ObservedEnv>, kind: Endpoint<B>) {
    const body = await parseBody(c, kind.schema);
    const answer = () =>
      withChatModel(state, body.model, (chat, modelId) => run(c, kind, body, chat, modelId));
    return body.stream && mustLoad(state, body.model)
      ? whileLoading(c, body.model, answer)
      : await answer();
  }

  async function run<B extends SharedFields>(
    c: Context<ObservedEnv>,
    kind: Endpoint<B>,
    body: B,
    { runtime, tokenizer, prompts }: ChatParts,
    modelId: string,
  ) {
    c.get("observer").model(modelId);
    // A large prompt that cannot fit is refused before it is tokenized.
    const checkLength = (atLeast: number) => checkPromptLength(runtime, atLeast, kind.promptParam);
    const req = await buildRequest(kind, body, { tokenizer, prompts }, modelId, checkLength);
    const abort = new AbortController();
    c.req.raw.signal.addEventListener("abort", () => abort.abort(), { once: true });
    const handle = submit(runtime, { ...req.params, signal: abort.signal }, kind.promptParam);
    live.add(req.writer.meta.id, handle);
    // A stream's headers go out at once, before its first chunk names it.
    c.header("sluice-request-id", req.writer.meta.id);
    const run = { handle, text: req.text, signal: abort.signal, observer: c.get("observer") };
    run.observer.generating();
    return req.stream
      ? respondSse(c, req, run, abort, sseKeepAliveMs)
      : await respondJson(c, req, run);
  }

  /** Chat goes through the agent path (server/agent/chat_run.ts), as the other agent APIs do. */
  async function chatTurn(c: Context<ObservedEnv>) {
    const body = await parseBody(c, ChatRequest);
    const answer = () =>
      withChatModel(state, body.model, (chat, modelId) => turn(c, body, chat, modelId));
    return body.stream && mustLoad(state, body.model)
      ? whileLoading(c, body.model, answer)
      : await answer();
  }

  /** A stream for a model still to load: keep-alive comments until it is (sse/while_loading.ts). */
  function whileLoading(
    c: Context<ObservedEnv>,
    requested: string | null | undefined,
    answer: () => Promise<Response>,
  ) {
    return streamWhileLoading({
      answer,
      errorEvent: (e) => `data: ${JSON.stringify(e.toJSON())}\n\n`,
      observer: c.get("observer"),
      keepAliveMs: sseKeepAliveMs,
      modelId: state.models.idOf(requested),
    });
  }

  async function turn(
    c: Context<ObservedEnv>,
    body: ChatRequest,
    { runtime, tokenizer, prompts }: ChatParts,
    modelId: string,
  ) {
    c.get("observer").model(modelId);
    const abort = new AbortController();
    c.req.raw.signal.addEventListener("abort", () => abort.abort(), { once: true });
    const observer = c.get("observer");
    const ctx = { runtime, tokenizer, prompts, modelId, observer, live, reasoningInline };
    const run = await startChoices(ctx, body, abort.signal);
    // A stream's headers go out at once, before its first chunk names it.
    c.header("sluice-request-id", run.id);
    const topLogprobs = chat.logprobs(body);
    const answer = {
      run,
      model: modelId,
      names: topLogprobs === null ? null : tokenNames(
        (id) => tokenizer.decode([id]),
        body.return_tokens_as_token_ids ?? false,
      ),
      includeUsage: body.stream_options?.include_usage ?? false,
      includeTiming: body.stream_options?.include_timing ?? false,
      observer,
      abort,
    };
    return body.stream
      ? respondChatSse(c, answer, sseKeepAliveMs)
      : await respondChatJson(c, answer);
  }

  return new Hono<ObservedEnv>()
    .post("/chat/completions", chatTurn)
    .post("/completions", (c) => complete(c, completion));
}
