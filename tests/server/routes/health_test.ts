// GET /health through the model's life: loading, failed (without the absolute paths of the error),
// ready, draining (no model needed: health reads only the server's state).

import type { PromptEncoder, Runtime } from "../../../runtime/service.ts";
import type { Tokenizer } from "../../../engine/text/tokenizer.ts";
import { createApp } from "../../../server/app.ts";
import { ServerMetrics } from "../../../server/metrics/server_metrics.ts";
import type { ServerState } from "../../../server/state/server_state.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

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
  // Anyone may ask /health: the failure says which file, not where it lives.
  state.model = {
    status: "failed",
    error: '/home/alice/models/m/model.safetensors: tensor "lm_head.weight" holds NaN or Inf',
  };
  assertEquals(await health(), [503, {
    status: "failed",
    error: '…/model.safetensors: tensor "lm_head.weight" holds NaN or Inf',
  }]);
  const chat = await app.request("/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}",
  });
  assertEquals(chat.status, 503);
  const failed = (await chat.json()).error;
  assertEquals(failed.code, "model_failed");
  assert(!failed.message.includes("/home/alice"), failed.message);

  state.model = {
    status: "ready",
    runtime: {} as Runtime,
    tokenizer: {} as Tokenizer,
    prompts: {} as PromptEncoder,
  };
  assertEquals(await health(), [200, { status: "ready" }]);
  state.draining = true;
  assertEquals(await health(), [503, { status: "draining" }]);
});
