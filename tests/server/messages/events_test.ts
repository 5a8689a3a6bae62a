// The Messages writer on synthetic assistant events: block indexes, deltas and stop reasons as
// Anthropic's stream has them, and a stream's blocks put together equal the whole message.

import type { AssistantEvent } from "../../../server/agent/assistant_events.ts";
import type { CompleteFinish, WireEvent } from "../../../server/agent/respond_turn.ts";
import { MessagesWriter } from "../../../server/messages/events.ts";
import { ApiError } from "../../../server/openai/errors.ts";
import { assertEquals } from "../../helpers/testing.ts";

const head = { id: "msg_test", model: "tiny", promptTokens: 9 };

function write(events: AssistantEvent[], finish: CompleteFinish = "stop", tokens = 4) {
  const w = new MessagesWriter(head);
  const wire = [...w.start(), ...events.flatMap((e) => w.push(e)), ...w.end(finish, tokens)];
  return { wire, whole: w.whole() as { content: object[]; stop_reason: string; usage: object } };
}

/** The message a stream builds, as Anthropic's SDK accumulates it. */
function accumulate(wire: WireEvent[]) {
  let message: any = null;
  const json: string[] = [];
  for (const { event, data } of wire) {
    const d = data as any;
    assertEquals(d.type, event);
    if (event === "message_start") message = structuredClone(d.message);
    if (event === "content_block_start") {
      assertEquals(d.index, message.content.length);
      message.content.push(structuredClone(d.content_block));
      json[d.index] = "";
    }
    if (event === "content_block_delta") {
      const block = message.content[d.index];
      if (d.delta.type === "text_delta") block.text += d.delta.text;
      if (d.delta.type === "thinking_delta") block.thinking += d.delta.thinking;
      if (d.delta.type === "input_json_delta") json[d.index] += d.delta.partial_json;
    }
    if (event === "content_block_stop" && message.content[d.index].type === "tool_use") {
      message.content[d.index].input = JSON.parse(json[d.index] || "{}");
    }
    if (event === "message_delta") {
      message.stop_reason = d.delta.stop_reason;
      message.usage.output_tokens = d.usage.output_tokens;
    }
  }
  return message;
}

const types = (wire: WireEvent[]) => wire.map((e) => e.event);

Deno.test("messages events: text is one text block between message_start and message_stop", () => {
  const { wire, whole } = write([{ type: "text", text: "Hel" }, { type: "text", text: "lo" }]);
  assertEquals(types(wire), [
    "message_start",
    "ping",
    "content_block_start",
    "content_block_delta",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
  ]);
  assertEquals(whole.content, [{ type: "text", text: "Hello" }]);
  assertEquals(whole.stop_reason, "end_turn");
  assertEquals(whole.usage, { input_tokens: 9, output_tokens: 4 });
  assertEquals(accumulate(wire), whole);
});

Deno.test("messages events: reasoning is a thinking block before the text block", () => {
  const { wire, whole } = write([
    { type: "reasoning", text: "hmm" },
    { type: "text", text: "yes" },
  ]);
  assertEquals(whole.content, [
    { type: "thinking", thinking: "hmm", signature: "" },
    { type: "text", text: "yes" },
  ]);
  assertEquals(accumulate(wire), whole);
});

Deno.test("messages events: one and two tool calls are tool_use blocks with their input, stop_reason tool_use", () => {
  for (const calls of [1, 2]) {
    const events: AssistantEvent[] = [{ type: "text", text: "Checking." }];
    for (let i = 0; i < calls; i++) {
      events.push(
        { type: "tool_call", index: i, id: `call_${i}`, name: "weather" },
        { type: "tool_arguments", index: i, fragment: '{"city":' },
        { type: "tool_arguments", index: i, fragment: `"C${i}"}` },
      );
    }
    const { wire, whole } = write(events, "tool_calls");
    assertEquals(whole.stop_reason, "tool_use");
    assertEquals(
      whole.content.slice(1),
      [...Array(calls).keys()].map((i) => ({
        type: "tool_use",
        id: `toolu_${i}`,
        name: "weather",
        input: { city: `C${i}` },
      })),
    );
    assertEquals(wire.filter((e) => e.event === "content_block_stop").length, 1 + calls);
    assertEquals(accumulate(wire), whole);
  }
});

Deno.test("messages events: a length finish is max_tokens; a call cut mid-input has input {}", () => {
  const { whole } = write([
    { type: "tool_call", index: 0, id: "call_a", name: "f" },
    { type: "tool_arguments", index: 0, fragment: '{"x": "unfini' },
  ], "length");
  assertEquals(whole.stop_reason, "max_tokens");
  assertEquals(whole.content, [{ type: "tool_use", id: "toolu_a", name: "f", input: {} }]);
});

Deno.test("messages events: a failed stream ends with Anthropic's error event, typed by status", () => {
  const w = new MessagesWriter(head);
  assertEquals(w.failed(new ApiError(503, "closing")), {
    event: "error",
    data: { type: "error", error: { type: "overloaded_error", message: "closing" } },
  });
  assertEquals(w.failed(new ApiError(500, "boom")).data, {
    type: "error",
    error: { type: "api_error", message: "boom" },
  });
});

Deno.test("messages writer: a turn a stop string ended says stop_sequence and names it", () => {
  const w = new MessagesWriter(head);
  w.push({ type: "text", text: "Hello" });
  const wire = w.end("stop", 3, "END");
  const delta = wire.find((e) => e.event === "message_delta")!.data as any;
  assertEquals(delta.delta, { stop_reason: "stop_sequence", stop_sequence: "END" });
  const whole = w.whole() as any;
  assertEquals([whole.stop_reason, whole.stop_sequence], ["stop_sequence", "END"]);
  // Without one, a stop is an end_turn.
  const plain = new MessagesWriter(head);
  plain.end("stop", 3);
  assertEquals((plain.whole() as any).stop_reason, "end_turn");
});
