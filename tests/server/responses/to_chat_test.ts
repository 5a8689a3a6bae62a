// A Responses request's translation to chat: items to messages, tools, tool_choice and text.format
// to their chat fields; and what the schema refuses, with the field it names.

import { ResponsesRequest } from "../../../server/responses/schema.ts";
import { toChat } from "../../../server/responses/to_chat.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

const parse = (body: object) => ResponsesRequest.parse({ model: "m", ...body });

Deno.test("responses to chat: a string input is one user message after the instructions", () => {
  const chat = toChat(parse({ input: "hi", instructions: "be brief", max_output_tokens: 5 }));
  assertEquals(chat.messages, [
    { role: "system", content: "be brief" },
    { role: "user", content: "hi" },
  ]);
  assertEquals(chat.max_completion_tokens, 5);
});

Deno.test("responses to chat: function calls join the assistant message before them; outputs are tool messages; reasoning is dropped", () => {
  const chat = toChat(parse({
    input: [
      { role: "developer", content: [{ type: "input_text", text: "rules" }] },
      { role: "user", content: "weather?" },
      { type: "reasoning", id: "rs_1", summary: [] },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Checking" }] },
      { type: "function_call", call_id: "c1", name: "w", arguments: '{"a":1}' },
      { type: "function_call", call_id: "c2", name: "w", arguments: '{"a":2}' },
      { type: "function_call_output", call_id: "c1", output: "sun" },
      {
        type: "function_call_output",
        call_id: "c2",
        output: [{ type: "input_text", text: "rain" }],
      },
      { type: "function_call", call_id: "c3", name: "w", arguments: "{}" },
    ],
  }));
  const call = (id: string, args: string) => ({
    id,
    type: "function",
    function: { name: "w", arguments: args },
  });
  assertEquals(chat.messages, [
    { role: "developer", content: "rules" },
    { role: "user", content: "weather?" },
    {
      role: "assistant",
      content: "Checking",
      tool_calls: [call("c1", '{"a":1}'), call("c2", '{"a":2}')],
    },
    { role: "tool", tool_call_id: "c1", content: "sun" },
    { role: "tool", tool_call_id: "c2", content: "rain" },
    { role: "assistant", content: null, tool_calls: [call("c3", "{}")] },
  ]);
});

Deno.test("responses to chat: function tools, tool_choice and text.format map onto chat's fields", () => {
  const schema = { type: "object", properties: { x: { type: "number" } } };
  const chat = toChat(parse({
    input: "x",
    tools: [{ type: "function", name: "f", description: "d", parameters: schema, strict: true }],
    tool_choice: { type: "function", name: "f" },
    parallel_tool_calls: false,
    text: { format: { type: "json_schema", name: "out", schema, strict: true } },
  }));
  assertEquals(chat.tools, [{
    type: "function",
    function: { name: "f", description: "d", parameters: schema, strict: true },
  }]);
  assertEquals(chat.tool_choice, { type: "function", function: { name: "f" } });
  assertEquals(chat.parallel_tool_calls, false);
  assertEquals(chat.response_format, {
    type: "json_schema",
    json_schema: { name: "out", description: undefined, schema, strict: true },
  });
  assertEquals(toChat(parse({ input: "x", tool_choice: "required" })).tool_choice, "required");
  assertEquals(
    toChat(parse({ input: "x", text: { format: { type: "json_object" } } }))
      .response_format,
    { type: "json_object" },
  );
});

Deno.test("responses schema: stateful fields, hosted tools, images and unknown items are refused naming the field", () => {
  const refusal = (body: object) => {
    const r = ResponsesRequest.safeParse({ model: "m", input: "x", ...body });
    assert(!r.success);
    return [r.error.issues[0].path.join("."), r.error.issues[0].message];
  };
  const [field, message] = refusal({ previous_response_id: "resp_1" });
  assertEquals(field, "previous_response_id");
  assert(message.includes("stateless"));
  assertEquals(refusal({ conversation: "conv_1" })[0], "conversation");
  assertEquals(refusal({ tools: [{ type: "web_search" }] })[0], "tools.0.type");
  assertEquals(
    refusal({ input: [{ role: "user", content: [{ type: "input_image" }] }] })[0],
    "input.0.content.0.type",
  );
  assertEquals(refusal({ input: [{ type: "item_reference", id: "x" }] })[0], "input.0.type");
  // store: true is OpenAI's default, so accepted (nothing is stored).
  assert(
    ResponsesRequest.safeParse({
      model: "m",
      input: "x",
      store: true,
      reasoning: { effort: "low" },
    }).success,
  );
});
