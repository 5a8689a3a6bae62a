// GET /health through the model's life: loading, failed, ready, draining (no model needed: health
// reads only the server's state).

import type { Runtime } from "../../../runtime/service.ts";
import type { Tokenizer } from "../../../engine/model/tokenizer.ts";
import { createApp } from "../../../server/app.ts";
import { ServerMetrics } from "../../../server/metrics/server_metrics.ts";
import type { ServerState } from "../../../server/state.ts";
import { assertEquals } from "../../helpers/testing.ts";

Deno.test("health: loading, failed, ready and draining", async () => {
  const state: ServerState = { model: { status: "loading" }, draining: false };
  const app = createApp(state, { modelId: "m", maxBodyBytes: 1024 }, new ServerMetrics());
  const health = async () => {
    const res = await app.request("/health");
    return [res.status, await res.json()];
  };
  assertEquals(await health(), [503, { status: "loading" }]);
  // Routes that need the model say why there is none.
  const models = await app.request("/v1/models");
  assertEquals(models.status, 503);
  assertEquals((await models.json()).error.code, "model_loading");

  state.model = { status: "failed", error: "no such file" };
  assertEquals(await health(), [503, { status: "failed", error: "no such file" }]);
  const chat = await app.request("/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}",
  });
  assertEquals(chat.status, 503);
  assertEquals((await chat.json()).error.code, "model_failed");

  state.model = { status: "ready", runtime: {} as Runtime, tokenizer: {} as Tokenizer };
  assertEquals(await health(), [200, { status: "ready" }]);
  state.draining = true;
  assertEquals(await health(), [503, { status: "draining" }]);
});
