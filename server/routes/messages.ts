// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API as a translation onto
// the chat path (errors in Anthropic's envelope: app.ts). A message is run as a chat turn and
// answered through the Messages writer; count_tokens counts the prompt the same request would run,
// tools included, rendered as /tokenize renders it.

import { type Context, Hono } from "hono";
import { chatBody } from "../agent/chat_body.ts";
import { turnPrompt } from "../agent/chat_prompt.ts";
import { respondTurn } from "../agent/respond_turn.ts";
import { startTurn, type TurnRouteConfig } from "../agent/start_turn.ts";
import { promptIds } from "../completions/kinds.ts";
import { MessagesWriter } from "../messages/events.ts";
import { CountTokensRequest, MessagesRequest } from "../messages/schema.ts";
import { toChat } from "../messages/to_chat.ts";
import type { ObservedEnv } from "../middleware/count_requests.ts";
import { parseBody } from "../openai/body.ts";
import { mustLoad, type ServerState, withChatModel } from "../state/server_state.ts";
import { streamWhileLoading } from "../sse/while_loading.ts";
import { anthropicError } from "../messages/errors.ts";

export function messagesRoutes(
  state: ServerState,
  route: TurnRouteConfig,
): Hono<ObservedEnv> {
  const { sseKeepAliveMs } = route;
  return new Hono<ObservedEnv>()
    .post("/messages", async (c) => {
      const body = await parseBody(c, MessagesRequest);
      const answer = () => respond(c, body);
      if (!body.stream || !mustLoad(state, body.model)) return await answer();
      return streamWhileLoading({
        answer,
        errorEvent: (e) => `event: error\ndata: ${JSON.stringify(anthropicError(e))}\n\n`,
        observer: c.get("observer"),
        keepAliveMs: sseKeepAliveMs,
        modelId: state.models.idOf(body.model),
      });
    })
    .post("/messages/count_tokens", async (c) => {
      const body = await parseBody(c, CountTokensRequest);
      return await withChatModel(state, body.model, async ({ prompts, tokenizer }) => {
        const chat = chatBody(toChat(body));
        const ids = await promptIds(prompts, turnPrompt(tokenizer, chat));
        return c.json({ input_tokens: ids.length });
      });
    });

  async function respond(c: Context<ObservedEnv>, body: MessagesRequest) {
    const { run, abort, modelId } = await startTurn(
      c,
      state,
      route,
      chatBody(toChat(body)),
      body.model,
    );
    const writer = new MessagesWriter({
      id: run.id.replace(/^chatcmpl-/, "msg_"),
      model: modelId,
      promptTokens: run.promptTokens,
    });
    const observer = c.get("observer");
    const stream = body.stream ?? false;
    return respondTurn(c, run, writer, { stream, abort, observer, keepAliveMs: sseKeepAliveMs });
  }
}
