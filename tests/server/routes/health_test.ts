// GET /health through the model's life: loading, failed (without the absolute paths of the error),
// ready, draining (no model needed: health reads only the server's state).

import { createApp } from "../../../server/app.ts";
import { ServerMetrics } from "../../../server/metrics/server_metrics.ts";
import type { ServerState } from "../../../server/state/server_state.ts";
import { startingState } from "../../helpers/model_router.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

Deno.test("health: loading, failed, ready and draining", async () => {
  const state: ServerState = startingState("m");
  const app = createApp(state, { maxBodyBytes: 1024 }, new ServerMetrics());
  const health = async () => {
    const res = await app.request("/health");
    return [res.status, await res.json()];
  };
  assertEquals(await health(), [503, { status: "loading" }]);
  // The models are listed while they load (listing loads nothing); routes that need one say why
  // there is none.
  const models = await app.request("/v1/models");
  assertEquals(models.status, 200);
  assertEquals(
    (await models.json()).data.map((m: { id: string; loaded: boolean }) => [m.id, m.loaded]),
    [["m", false]],
  );
  const early = await app.request("/v1/completions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", prompt: "hi" }),
  });
  assertEquals([early.status, (await early.json()).error.code], [503, "model_loading"]);

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
    body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
  });
  assertEquals(chat.status, 503);
  const failed = (await chat.json()).error;
  assertEquals(failed.code, "model_failed");
  assert(!failed.message.includes("/home/alice"), failed.message);

  state.model = { status: "ready" };
  assertEquals(await health(), [200, { status: "ready" }]);
  state.draining = true;
  assertEquals(await health(), [503, { status: "draining" }]);
});
