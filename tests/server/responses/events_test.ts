// The Responses writer on synthetic assistant events: the stream it writes is read by the official
// client's own accumulator (which checks every index, id and part), and what that accumulator
// builds is the response the writer answers whole.

import { accumulateResponse } from "openai/lib/responses/ResponseAccumulator";
import type { Response, ResponseStreamEvent } from "openai/resources/responses/responses";
import type { AssistantEvent } from "../../../server/agent/assistant_events.ts";
import type { CompleteFinish, WireEvent } from "../../../server/agent/respond_turn.ts";
import { ApiError } from "../../../server/openai/errors.ts";
import { ResponsesWriter } from "../../../server/responses/events.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

const head = {
  id: "resp_test",
  createdAt: 1700000000,
  model: "tiny",
  promptTokens: 7,
  settings: { store: false },
};

function write(events: AssistantEvent[], finish: CompleteFinish = "stop", tokens = 5) {
  const w = new ResponsesWriter(head);
  const wire = [...w.start(), ...events.flatMap((e) => w.push(e)), ...w.end(finish, tokens)];
  return { wire, whole: w.whole() as Response };
}

/** The client's view of a stream: its events applied in order. */
function accumulate(wire: WireEvent[]): Response {
  let snapshot: Response | undefined;
  for (const e of wire) {
    assertEquals(e.event, (e.data as { type: string }).type);
    snapshot = accumulateResponse(e.data as ResponseStreamEvent, snapshot);
  }
  return snapshot!;
}

const types = (wire: WireEvent[]) => wire.map((e) => e.event);
const text = (t: string): AssistantEvent => ({ type: "text", text: t });

Deno.test("responses events: text is one message item, its deltas between the part's and item's bracketing events", () => {
  const { wire, whole } = write([text("Hel"), text("lo")]);
  assertEquals(types(wire), [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
  ]);
  assertEquals(wire.map((e) => (e.data as { sequence_number: number }).sequence_number), [
    ...wire.keys(),
  ]);
  assertEquals(whole.status, "completed");
  assertEquals(whole.output.length, 1);
  const msg = whole.output[0];
  assert(msg.type === "message");
  assertEquals(msg.content, [{ type: "output_text", text: "Hello", annotations: [] }]);
  assertEquals(whole.usage?.total_tokens, 12);
  const seen = accumulate(wire);
  assertEquals(seen.output, whole.output);
  assertEquals(seen.output_text, "Hello");
});

Deno.test("responses events: reasoning then text are two items, the reasoning as reasoning_text", () => {
  const { wire, whole } = write([
    { type: "reasoning", text: "think" },
    { type: "reasoning", text: "ing" },
    text("answer"),
  ]);
  assert(types(wire).includes("response.reasoning_text.delta"));
  assert(types(wire).includes("response.reasoning_text.done"));
  assertEquals(whole.output.map((i) => i.type), ["reasoning", "message"]);
  const r = whole.output[0];
  assert(r.type === "reasoning");
  assertEquals(r.content, [{ type: "reasoning_text", text: "thinking" }]);
  assertEquals(accumulate(wire).output, whole.output);
});

Deno.test("responses events: one and two tool calls are function_call items with their arguments", () => {
  for (const calls of [1, 2]) {
    const events: AssistantEvent[] = [text("Let me check.")];
    for (let i = 0; i < calls; i++) {
      events.push(
        { type: "tool_call", index: i, id: `call_${i}`, name: "weather" },
        { type: "tool_arguments", index: i, fragment: '{"city":' },
        { type: "tool_arguments", index: i, fragment: `"C${i}"}` },
      );
    }
    const { wire, whole } = write(events, "tool_calls");
    assertEquals(whole.status, "completed");
    assertEquals(whole.output.length, 1 + calls);
    for (let i = 0; i < calls; i++) {
      const call = whole.output[1 + i];
      assert(call.type === "function_call");
      assertEquals([call.call_id, call.name, call.arguments, call.status], [
        `call_${i}`,
        "weather",
        `{"city":"C${i}"}`,
        "completed",
      ]);
    }
    const done = wire.filter((e) => e.event === "response.function_call_arguments.done");
    assertEquals(done.length, calls);
    assertEquals(
      wire.filter((e) => e.event === "response.function_call_arguments.delta").length,
      2 * calls,
    );
    assertEquals(accumulate(wire).output, whole.output);
  }
});

Deno.test("responses events: a length finish is response.incomplete, its open item incomplete", () => {
  const { wire, whole } = write([text("cut sho")], "length");
  assertEquals(wire.at(-1)!.event, "response.incomplete");
  assertEquals(whole.status, "incomplete");
  assertEquals(whole.incomplete_details, { reason: "max_output_tokens" });
  const msg = whole.output[0];
  assert(msg.type === "message");
  assertEquals(msg.status, "incomplete");
  assertEquals(accumulate(wire).status, "incomplete");
});

Deno.test("responses events: a failed turn's last event is an error event, numbered in sequence", () => {
  const w = new ResponsesWriter(head);
  const wire = [...w.start(), ...w.push(text("a"))];
  const err = w.failed(new ApiError(503, "cut", null, "server_shutdown"));
  assertEquals(err, {
    event: "error",
    data: {
      type: "error",
      sequence_number: wire.length,
      code: "server_shutdown",
      message: "cut",
      param: null,
    },
  });
});
