// Chat completions' wire format for synthetic assistant events: reasoning in reasoning_content
// and reasoning, a tool call opened with its id and name then its arguments in fragments, runs of
// one kind merged into one delta, and the whole message (content null when only calls).

import type { AssistantEvent } from "../../../server/agent/assistant_events.ts";
import { chatDeltas, ChatMessageBuilder } from "../../../server/agent/chat_wire.ts";
import { assertEquals } from "../../helpers/testing.ts";

const turn: AssistantEvent[] = [
  { type: "reasoning", text: "The user wants " },
  { type: "reasoning", text: "the weather." },
  { type: "tool_call", index: 0, id: "call_a", name: "get_weather" },
  { type: "tool_arguments", index: 0, fragment: '{"city": ' },
  { type: "tool_arguments", index: 0, fragment: '"Oslo"}' },
  { type: "tool_call", index: 1, id: "call_b", name: "get_time" },
  { type: "tool_arguments", index: 1, fragment: "{}" },
];

Deno.test("chat wire: deltas for reasoning and tool calls", () => {
  assertEquals(chatDeltas(turn), [
    { reasoning_content: "The user wants the weather.", reasoning: "The user wants the weather." },
    {
      tool_calls: [{
        index: 0,
        id: "call_a",
        type: "function",
        function: { name: "get_weather", arguments: '{"city": "Oslo"}' },
      }],
    },
    {
      tool_calls: [{
        index: 1,
        id: "call_b",
        type: "function",
        function: { name: "get_time", arguments: "{}" },
      }],
    },
  ]);
  // Fragments in a later step continue their call by index alone, as OpenAI streams them.
  assertEquals(chatDeltas([{ type: "tool_arguments", index: 1, fragment: "}" }]), [
    { tool_calls: [{ index: 1, function: { arguments: "}" } }] },
  ]);
  assertEquals(chatDeltas([{ type: "text", text: "a" }, { type: "text", text: "b" }]), [
    { content: "ab" },
  ]);
  assertEquals(chatDeltas([]), []);
});

Deno.test("chat wire: the whole message", () => {
  const calls = new ChatMessageBuilder();
  calls.add(turn.slice(0, 4));
  calls.add(turn.slice(4));
  assertEquals(calls.message(), {
    role: "assistant",
    content: null,
    reasoning_content: "The user wants the weather.",
    reasoning: "The user wants the weather.",
    tool_calls: [
      {
        id: "call_a",
        type: "function",
        function: { name: "get_weather", arguments: '{"city": "Oslo"}' },
      },
      { id: "call_b", type: "function", function: { name: "get_time", arguments: "{}" } },
    ],
  });
  const text = new ChatMessageBuilder();
  text.add([{ type: "text", text: "Hello" }]);
  assertEquals(text.message(), { role: "assistant", content: "Hello" });
  assertEquals(new ChatMessageBuilder().message(), { role: "assistant", content: "" });
});
