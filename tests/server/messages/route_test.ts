// POST /v1/messages and /v1/messages/count_tokens end to end on the harness server: a whole
// message and a stream of the same request, count_tokens equal to the message's input tokens and
// to /tokenize's count, and every error in Anthropic's envelope.

import { MODEL_ID, namedSseEvents, startServer } from "../harness.ts";
import { assert, assertEquals, assertMatch } from "../../helpers/testing.ts";

const BODY = {
  model: MODEL_ID,
  system: "be brief",
  messages: [{ role: "user", content: "hi" }],
  max_tokens: 4,
  temperature: 0,
};

Deno.test("messages route: a whole message and a stream of the same request say the same", async () => {
  const s = await startServer();
  try {
    const res = await s.post("/v1/messages", BODY, {
      headers: { "anthropic-version": "2023-06-01" },
    });
    assertEquals(res.status, 200);
    const whole = await res.json();
    assertMatch(whole.id, /^msg_/);
    assertEquals([whole.type, whole.role, whole.model], ["message", "assistant", MODEL_ID]);
    assert(["end_turn", "max_tokens"].includes(whole.stop_reason), whole.stop_reason);
    assertEquals(whole.content.length, 1);
    assertEquals(whole.content[0].type, "text");
    assert(whole.usage.output_tokens >= 1 && whole.usage.output_tokens <= 4);

    const counted = await (await s.post("/v1/messages/count_tokens", {
      model: MODEL_ID,
      system: "be brief",
      messages: BODY.messages,
    })).json();
    assertEquals(counted, { input_tokens: whole.usage.input_tokens });
    const tokenized = await (await s.post("/tokenize", {
      model: MODEL_ID,
      messages: [{ role: "system", content: "be brief" }, { role: "user", content: "hi" }],
    })).json();
    assertEquals(counted.input_tokens, tokenized.count);

    const events = await namedSseEvents(await s.post("/v1/messages", { ...BODY, stream: true }));
    assertEquals(events.map((e) => e.event).slice(0, 3), [
      "message_start",
      "ping",
      "content_block_start",
    ]);
    assertEquals(events.map((e) => e.event).slice(-3), [
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    assertEquals(events[0].data.message.usage.input_tokens, whole.usage.input_tokens);
    const text = events.filter((e) => e.event === "content_block_delta")
      .map((e) => e.data.delta.text).join("");
    assertEquals(text, whole.content[0].text);
    const delta = events.at(-2)!.data;
    assertEquals(delta.delta.stop_reason, whole.stop_reason);
    assertEquals(delta.usage.output_tokens, whole.usage.output_tokens);
  } finally {
    await s.close();
  }
});

Deno.test("messages route: bad bodies, wrong models and keys are answered in Anthropic's envelope", async () => {
  const s = await startServer({ config: { apiKey: "sekret" } });
  try {
    const key = { "x-api-key": "sekret", authorization: "" };
    const error = async (res: Response, status: number, type: string) => {
      assertEquals(res.status, status);
      const body = await res.json();
      assertEquals([body.type, body.error.type], ["error", type]);
      return body.error.message as string;
    };
    const noMax = { ...BODY, max_tokens: undefined };
    assertMatch(
      await error(
        await s.post("/v1/messages", noMax, { headers: key }),
        400,
        "invalid_request_error",
      ),
      /max_tokens/,
    );
    await error(
      await s.post("/v1/messages", { ...BODY, model: "claude-x" }, { headers: key }),
      404,
      "not_found_error",
    );
    await error(
      await s.post("/v1/messages", BODY, { headers: { authorization: "" } }),
      401,
      "authentication_error",
    );
    await error(
      await s.post("/v1/messages/count_tokens", { model: MODEL_ID }, { headers: key }),
      400,
      "invalid_request_error",
    );
    const ok = await s.post("/v1/messages", BODY, { headers: key });
    assertEquals(ok.status, 200);
    await ok.body?.cancel();
  } finally {
    await s.close();
  }
});
