// An Anthropic Messages request's translation to chat: system, text, tool_use and tool_result
// blocks to messages; tools and tool_choice to their chat fields; what the schema refuses.

import { MessagesRequest } from "../../../server/messages/schema.ts";
import { toChat } from "../../../server/messages/to_chat.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

const parse = (body: object) => MessagesRequest.parse({ model: "m", max_tokens: 8, ...body });

Deno.test("messages to chat: system and text messages, sampling fields and stop sequences", () => {
  const chat = toChat(parse({
    system: [{ type: "text", text: "be " }, { type: "text", text: "brief" }],
    messages: [{ role: "user", content: "hi" }],
    stop_sequences: ["\n\n"],
    temperature: 0.5,
    top_k: 3,
    metadata: { user_id: "u1" },
  }));
  assertEquals(chat.messages, [
    { role: "system", content: "be brief" },
    { role: "user", content: "hi" },
  ]);
  assertEquals([chat.max_tokens, chat.stop, chat.temperature, chat.top_k, chat.user], [
    8,
    ["\n\n"],
    0.5,
    3,
    "u1",
  ]);
});

Deno.test("messages to chat: tool_use blocks are tool_calls, tool_result blocks tool messages ahead of the user's text; thinking is dropped", () => {
  const chat = toChat(parse({
    messages: [
      { role: "user", content: "weather?" },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "hmm", signature: "" },
          { type: "text", text: "Checking" },
          { type: "tool_use", id: "toolu_1", name: "w", input: { city: "Oslo" } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "toolu_1", content: "sun" },
          {
            type: "tool_result",
            tool_use_id: "toolu_2",
            content: [{ type: "text", text: "no" }],
            is_error: true,
          },
          { type: "text", text: "thanks" },
        ],
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_3" }] },
    ],
  }));
  assertEquals(chat.messages, [
    { role: "user", content: "weather?" },
    {
      role: "assistant",
      content: "Checking",
      tool_calls: [{
        id: "toolu_1",
        type: "function",
        function: { name: "w", arguments: '{"city":"Oslo"}' },
      }],
    },
    { role: "tool", tool_call_id: "toolu_1", content: "sun" },
    { role: "tool", tool_call_id: "toolu_2", content: "Error: no" },
    { role: "user", content: "thanks" },
    { role: "tool", tool_call_id: "toolu_3", content: "" },
  ]);
});

Deno.test("messages to chat: tools and each tool_choice", () => {
  const tools = [{ name: "w", description: "weather", input_schema: { type: "object" } }];
  const choice = (tool_choice: object) =>
    toChat(parse({ messages: [{ role: "user", content: "x" }], tools, tool_choice }));
  assertEquals(choice({ type: "auto" }).tools, [{
    type: "function",
    function: { name: "w", description: "weather", parameters: { type: "object" } },
  }]);
  assertEquals(choice({ type: "auto" }).tool_choice, "auto");
  assertEquals(choice({ type: "none" }).tool_choice, "none");
  assertEquals(choice({ type: "any" }).tool_choice, "required");
  const one = choice({ type: "tool", name: "w", disable_parallel_tool_use: true });
  assertEquals(one.tool_choice, { type: "function", function: { name: "w" } });
  assertEquals(one.parallel_tool_calls, false);
});

Deno.test("messages schema: max_tokens is required; images and server tools are refused naming the field", () => {
  const refusal = (body: object) => {
    const r = MessagesRequest.safeParse({
      model: "m",
      max_tokens: 8,
      messages: [{ role: "user", content: "x" }],
      ...body,
    });
    assert(!r.success);
    return r.error.issues[0].path.join(".");
  };
  assertEquals(refusal({ max_tokens: undefined }), "max_tokens");
  assertEquals(
    refusal({ messages: [{ role: "user", content: [{ type: "image", source: {} }] }] }),
    "messages.0.content.0.type",
  );
  assertEquals(
    refusal({ tools: [{ type: "web_search_20250305", name: "web_search" }] }),
    "tools.0.type",
  );
  assertEquals(refusal({ tool_choice: { type: "tool" } }), "tool_choice.name");
});
