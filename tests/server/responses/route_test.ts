// POST /v1/responses end to end on the harness server: a whole response and a stream (read raw and
// by the official client), its prompt counted as /tokenize counts the same messages, and the
// refusals in OpenAI's envelope.

import { MODEL_ID, namedSseEvents, startServer } from "../harness.ts";
import { assert, assertEquals, assertMatch } from "../../helpers/testing.ts";

const BODY = {
  model: MODEL_ID,
  instructions: "be brief",
  input: "hi",
  max_output_tokens: 4,
  temperature: 0,
};

Deno.test("responses route: a whole response and a stream of the same request say the same", async () => {
  const s = await startServer();
  try {
    const res = await s.post("/v1/responses", BODY);
    assertEquals(res.status, 200);
    const whole = await res.json();
    assertMatch(whole.id, /^resp_/);
    assertEquals([whole.object, whole.model, whole.store], ["response", MODEL_ID, false]);
    assert(["completed", "incomplete"].includes(whole.status));
    assertEquals(whole.output.length, 1);
    const [msg] = whole.output;
    assertEquals([msg.type, msg.role, msg.content[0].type], [
      "message",
      "assistant",
      "output_text",
    ]);
    const text: string = msg.content[0].text;
    assert(whole.usage.output_tokens >= 1 && whole.usage.output_tokens <= 4);

    const counted = await (await s.post("/tokenize", {
      model: MODEL_ID,
      messages: [{ role: "system", content: "be brief" }, { role: "user", content: "hi" }],
    })).json();
    assertEquals(whole.usage.input_tokens, counted.count);

    const events = await namedSseEvents(await s.post("/v1/responses", { ...BODY, stream: true }));
    assertEquals(events.slice(0, 2).map((e) => e.event), [
      "response.created",
      "response.in_progress",
    ]);
    assertEquals(events.map((e) => e.data.sequence_number), [...events.keys()]);
    const deltas = events.filter((e) => e.event === "response.output_text.delta");
    assertEquals(deltas.map((e) => e.data.delta).join(""), text);
    const last = events.at(-1)!;
    assertEquals(last.event, `response.${whole.status}`);
    assertEquals(last.data.response.output[0].content, msg.content);
    assertEquals(last.data.response.usage, whole.usage);

    // The official client reads the same stream into the same response.
    const final = await s.client.responses.stream({ ...BODY }).finalResponse();
    assertEquals(final.output_text, text);
    assertEquals(final.status, whole.status);
  } finally {
    await s.close();
  }
});

Deno.test("responses route: previous_response_id, hosted tools and wrong models are refused in OpenAI's envelope", async () => {
  const s = await startServer();
  try {
    const refused = async (body: object, status = 400) => {
      const res = await s.post("/v1/responses", { ...BODY, ...body });
      assertEquals(res.status, status);
      return (await res.json()).error;
    };
    const stateful = await refused({ previous_response_id: "resp_abc" });
    assertEquals(stateful.param, "previous_response_id");
    assertMatch(stateful.message, /stateless/);
    assertEquals((await refused({ tools: [{ type: "web_search" }] })).param, "tools.0.type");
    assertEquals((await refused({ input: [] })).param, "input");
    assertEquals((await refused({ model: "gpt-x" }, 404)).code, "model_not_found");
    assertEquals(await refused({ stream: true, previous_response_id: "resp_abc" }), stateful);
  } finally {
    await s.close();
  }
});
