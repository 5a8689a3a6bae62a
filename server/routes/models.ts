// GET /v1/models: the one model this server serves, with its context length and vocabulary.

import { Hono } from "hono";
import { readyModel, type ServerState } from "../state/server_state.ts";

export function modelsRoutes(state: ServerState, modelId: string): Hono {
  return new Hono().get("/models", (c) => {
    const { runtime } = readyModel(state);
    return c.json({
      object: "list",
      data: [{
        id: modelId,
        object: "model",
        created: 0,
        owned_by: "sluice",
        max_model_len: runtime.info.maxContext,
        vocab_size: runtime.info.vocabSize,
      }],
    });
  });
}
