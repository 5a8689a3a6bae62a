// Starts the chat turn another API's request was translated to: the route's runtime, metrics and
// live requests as the chat run's context, an abort that follows the client's connection, and the
// run's id as the sluice-request-id header (POST /v1/requests/{id}/priority reaches it by it).

import type { Context } from "hono";
import type { ObservedEnv } from "../middleware/count_requests.ts";
import type { ChatRequest } from "../openai/schemas.ts";
import { type ServerState, withChatModel } from "../state/server_state.ts";
import type { LiveRequests } from "../completions/live_requests.ts";
import { type ChatContext, type ChatRun, startChat } from "./chat_run.ts";

/** What the routes that start turns share. */
export interface TurnRouteConfig {
  /** Where running requests are kept by response id (POST /v1/requests/{id}/priority). */
  live: LiveRequests;
  /** Ms of silence after which a stream sends a keep-alive comment. */
  sseKeepAliveMs?: number;
  /** --reasoning-format none: reasoning stays in the text unless a request asks otherwise. */
  reasoningInline?: boolean;
}

export interface StartedTurn {
  run: ChatRun;
  abort: AbortController;
  /** The id of the model that runs it (what the answer names as its model). */
  modelId: string;
}

export async function startTurn(
  c: Context<ObservedEnv>,
  state: ServerState,
  route: TurnRouteConfig,
  body: ChatRequest,
  requestedModel: string | null | undefined,
): Promise<StartedTurn> {
  return await withChatModel(state, requestedModel, async (chat, modelId) => {
    const abort = new AbortController();
    c.req.raw.signal.addEventListener("abort", () => abort.abort(), { once: true });
    const observer = c.get("observer");
    observer.model(modelId);
    const { live, reasoningInline } = route;
    const ctx: ChatContext = { ...chat, observer, modelId, live, reasoningInline };
    const run = await startChat(ctx, body, abort.signal);
    c.header("sluice-request-id", run.id);
    return { run, abort, modelId };
  });
}
