// GET /v1/models: every model this server can serve, loaded or not (`loaded`, and `status`:
// unloaded, loading or ready), with its context length and vocabulary once it is loaded. Listing
// loads nothing.

import { Hono } from "hono";
import type { ServerState } from "../state/server_state.ts";

export function modelsRoutes(state: ServerState): Hono {
  return new Hono().get("/models", (c) => {
    const chats = new Map(state.models.loaded().map(({ id, model }) => [id, model]));
    return c.json({
      object: "list",
      data: state.models.list().map((m) => {
        const model = chats.get(m.id);
        const info = model?.chat?.runtime.info;
        return {
          id: m.id,
          object: "model",
          created: 0,
          owned_by: "sluice",
          loaded: m.status === "ready",
          status: m.status,
          pinned: m.pinned,
          ...(m.aliases.length ? { aliases: m.aliases } : {}),
          ...(model ? { kind: model.kind } : {}),
          ...(info ? { max_model_len: info.maxContext, vocab_size: info.vocabSize } : {}),
        };
      }),
    });
  });
}
