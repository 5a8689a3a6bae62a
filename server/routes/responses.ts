// POST /v1/responses: OpenAI's Responses API, stateless, as a translation onto the chat path.
// Parse, translate to a chat body (checked by chat's schema), run the turn, answer it through the
// Responses writer as a stream or as one response object.

import { type Context, Hono } from "hono";
import { chatBody } from "../agent/chat_body.ts";
import { respondTurn } from "../agent/respond_turn.ts";
import { startTurn, type TurnRouteConfig } from "../agent/start_turn.ts";
import type { ObservedEnv } from "../middleware/count_requests.ts";
import { parseBody } from "../openai/body.ts";
import { ResponsesWriter } from "../responses/events.ts";
import { echoSettings } from "../responses/response.ts";
import { ResponsesRequest } from "../responses/schema.ts";
import { toChat } from "../responses/to_chat.ts";
import { mustLoad, type ServerState } from "../state/server_state.ts";
import { streamWhileLoading } from "../sse/while_loading.ts";

export function responsesRoutes(
  state: ServerState,
  route: TurnRouteConfig,
): Hono<ObservedEnv> {
  const { sseKeepAliveMs } = route;
  return new Hono<ObservedEnv>().post("/responses", async (c) => {
    const body = await parseBody(c, ResponsesRequest);
    const answer = () => respond(c, body);
    if (!body.stream || !mustLoad(state, body.model)) return await answer();
    return streamWhileLoading({
      answer,
      // A Responses stream's error event, numbered as the first event of the stream.
      errorEvent: (e) =>
        `event: error\ndata: ${
          JSON.stringify({
            type: "error",
            sequence_number: 0,
            code: e.code,
            message: e.message,
            param: e.param,
          })
        }\n\n`,
      observer: c.get("observer"),
      keepAliveMs: sseKeepAliveMs,
      modelId: state.models.idOf(body.model),
    });
  });

  async function respond(c: Context<ObservedEnv>, body: ResponsesRequest) {
    const { run, abort, modelId } = await startTurn(
      c,
      state,
      route,
      chatBody(toChat(body)),
      body.model,
    );
    const writer = new ResponsesWriter({
      id: run.id.replace(/^chatcmpl-/, "resp_"),
      createdAt: run.created,
      model: modelId,
      promptTokens: run.promptTokens,
      settings: echoSettings(body),
    });
    const observer = c.get("observer");
    const stream = body.stream ?? false;
    return respondTurn(c, run, writer, { stream, abort, observer, keepAliveMs: sseKeepAliveMs });
  }
}
