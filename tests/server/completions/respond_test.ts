// How an answer ends when generation fails: a stream ends with one OpenAI error event and no finish
// chunk or [DONE]; a whole response is a 500 envelope. The engine is made to fail a step on cue.

import type { StepEngine } from "../../../engine/engine.ts";
import { sampleValue } from "../../../server/metrics/parse.ts";
import { assert, assertEquals, assertMatch } from "../../helpers/testing.ts";
import { MODEL_ID, sseData, startServer } from "../harness.ts";

/** Wraps an engine so that every step after the `failAt`-th rejects, as a lost device would. */
function failing(engine: StepEngine, control: { failAt: number }): StepEngine {
  let steps = 0;
  return {
    info: engine.info,
    step: (plan) =>
      ++steps > control.failAt ? Promise.reject(new Error("device lost")) : engine.step(plan),
    close: () => engine.close(),
  };
}

Deno.test("respond: a failed generation ends a stream with an error event, a response with 500", async () => {
  const control = { failAt: Infinity };
  const s = await startServer({ wrapEngine: (e) => failing(e, control) });
  const body = {
    model: MODEL_ID,
    prompt: [4, 5, 6],
    max_tokens: 100,
    ignore_eos: true,
  };
  try {
    // Warm up (compiles the kernels), then let the next request run four steps and fail.
    await s.client.completions.create({ ...body, max_tokens: 2 });
    control.failAt = s.runtime.stats().steps + 4;
    const res = await s.post("/v1/completions", { ...body, stream: true });
    assertEquals(res.status, 200);
    const data = await sseData(res);
    const last = JSON.parse(data.at(-1)!);
    assertEquals(last.error.type, "server_error");
    assertMatch(last.error.message, /device lost/);
    assert(!data.includes("[DONE]"), "a failed stream has no [DONE]");
    for (const d of data.slice(0, -1)) assertEquals(JSON.parse(d).choices[0].finish_reason, null);
    assert(data.length > 1, "some tokens came before the failure");

    control.failAt = s.runtime.stats().steps + 4;
    const whole = await s.post("/v1/chat/completions", {
      ...body,
      prompt: undefined,
      messages: [{ role: "user", content: "hi" }],
    });
    assertEquals(whole.status, 500);
    const err = await whole.json();
    assertEquals(err.error.type, "server_error");
    assertMatch(err.error.message, /device lost/);

    const m = await s.scrape();
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "500" }), 2);
  } finally {
    await s.close();
  }
});
