import { assert, assertEquals } from "../../helpers/testing.ts";
import type { AssistantEvent } from "../../../server/agent/assistant_events.ts";
import {
  AssistantParser,
  type AssistantParserOptions,
} from "../../../server/agent/assistant_parser.ts";

interface Turn {
  reasoning: string;
  text: string;
  calls: { index: number; id: string; name: string; arguments: string }[];
}

type Options = Omit<AssistantParserOptions, "newId">;

/** Reads a whole turn from its deltas; calls announce before their arguments, ids in order. */
function read(options: Options, deltas: string[]): Turn {
  let n = 0;
  const parser = new AssistantParser({ ...options, newId: () => `call_${n++}` });
  const events: AssistantEvent[] = [];
  for (const delta of deltas) events.push(...parser.push(delta));
  events.push(...parser.flush());
  const turn: Turn = { reasoning: "", text: "", calls: [] };
  for (const e of events) {
    if (e.type === "text") turn.text += e.text;
    else if (e.type === "reasoning") turn.reasoning += e.text;
    else if (e.type === "tool_call") {
      assertEquals(e.index, turn.calls.length);
      turn.calls.push({ index: e.index, id: e.id, name: e.name, arguments: "" });
    } else {
      assert(turn.calls[e.index], "arguments before their call");
      turn.calls[e.index].arguments += e.fragment;
    }
  }
  for (const call of turn.calls) JSON.parse(call.arguments); // always valid JSON
  assertEquals(parser.called, turn.calls.length > 0);
  assertEquals(parser.calls.map((c) => c.arguments), turn.calls.map((c) => c.arguments));
  return turn;
}

/** The same turn whatever the deltas: whole, one character at a time, and split at every point. */
function readEverySplit(options: Options, output: string): Turn {
  const whole = read(options, [output]);
  assertEquals(read(options, [...output]), whole, "one character at a time");
  for (let i = 0; i <= output.length; i++) {
    assertEquals(read(options, [output.slice(0, i), output.slice(i)]), whole, `split at ${i}`);
  }
  return whole;
}

/** Calls as read: each name with its arguments' text as the model wrote it. */
function calls(...pairs: [string, string][]) {
  return pairs.map(([name, args], index) => ({
    index,
    id: `call_${index}`,
    name,
    arguments: args,
  }));
}

const hermes: Options = { format: "hermes", reasoning: "split", toolsEnabled: true };

Deno.test("hermes: text, reasoning and two calls, split anywhere", () => {
  const output = "<think>\nThe user wants weather.\n</think>\n\nLet me check.\n" +
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2.5e1]}}\n' +
    "</tool_call>\n" +
    '<tool_call>\n{"name": "get_time", "arguments": {"tz": "Europe/Paris \\"CET\\" \\u00e9"}}\n' +
    "</tool_call>";
  const turn = readEverySplit(hermes, output);
  assertEquals(turn.reasoning, "The user wants weather.\n");
  assertEquals(turn.text, "Let me check.");
  assertEquals(turn.calls, [
    {
      index: 0,
      id: "call_0",
      name: "get_weather",
      arguments: '{"city": "Paris", "days": [1, 2.5e1]}',
    },
    {
      index: 1,
      id: "call_1",
      name: "get_time",
      arguments: '{"tz": "Europe/Paris \\"CET\\" \\u00e9"}',
    },
  ]);
});

Deno.test("hermes: arguments stream as they are written, before the call ends", () => {
  const parser = new AssistantParser({ ...hermes, newId: () => "call_x" });
  assertEquals(parser.push("Sure. <tool"), [{ type: "text", text: "Sure." }]);
  assertEquals(parser.push('_call>\n{"name": "f"'), []);
  assertEquals(parser.push(', "arguments": {"a": 1'), [
    { type: "tool_call", index: 0, id: "call_x", name: "f" },
    { type: "tool_arguments", index: 0, fragment: '{"a": 1' },
  ]);
  // The comma waits for its key: had the output stopped here, `{"a": 1}` closes it.
  assertEquals(parser.push(", "), []);
  assertEquals(parser.push('"b": 2}}\n</tool_call>'), [
    { type: "tool_arguments", index: 0, fragment: ', "b": 2}' },
  ]);
  assertEquals(parser.flush(), []);
  assertEquals(parser.finish("stop"), "tool_calls");
  assertEquals(parser.finish("length"), "length");
});

Deno.test("hermes: a call cut off by the length limit still has valid arguments", () => {
  for (
    const [output, args] of [
      ['<tool_call>\n{"name": "f", "arguments": {"a": [1, "x\\u00', '{"a": [1, "x\\u0000"]}'],
      ['<tool_call>\n{"name": "f", "arguments": {"a": 1, ', '{"a": 1}'],
      ['<tool_call>\n{"name": "f", "arguments": {"a": tr', '{"a": true}'],
      ['<tool_call>\n{"name": "f", "arguments": {"a": -', '{"a": -0}'],
      ['<tool_call>\n{"name": "f", "arguments": {"a"', '{"a": null}'],
    ]
  ) {
    const turn = readEverySplit(hermes, output);
    assertEquals(turn.calls, [{ index: 0, id: "call_0", name: "f", arguments: args }], output);
    assertEquals(turn.text, "");
  }
});

Deno.test("hermes: what is not a call stays text", () => {
  for (
    const output of [
      "a <tool_call> is how I call tools",
      "<tool_call>\nnot json\n</tool_call> ok",
      '<tool_call>\n{"arguments": {}}\n</tool_call>',
      "ends with <tool_c",
      '<tool_call>\n{"name": "f"',
      // A call is announced once its arguments begin: cut off before, it is text.
      '<tool_call>\n{"name": "f", "arguments": ',
      "a < b and <tool>",
    ]
  ) {
    const turn = readEverySplit(hermes, output);
    assertEquals(turn, { reasoning: "", text: output, calls: [] }, output);
  }
});

Deno.test("hermes: arguments given as a JSON string, before the name, or not at all", () => {
  const turn = readEverySplit(
    hermes,
    '<tool_call>{"arguments": "{\\"a\\": 1}", "name": "f"}</tool_call>' +
      '<tool_call>{"arguments": {"b": [true]}, "name": "g"}</tool_call>' +
      '<tool_call>{"name": "h"}</tool_call>',
  );
  assertEquals(turn.calls, calls(["f", '{"a":1}'], ["g", '{"b": [true]}'], ["h", "{}"]));
});

Deno.test("reasoning: the template opened <think>; inline keeps it; no tools: markers are text", () => {
  const output = "I should greet.</think>\n\nHello! <tool_call>";
  assertEquals(
    readEverySplit({ ...hermes, startsInReasoning: true, toolsEnabled: false }, output),
    {
      reasoning: "I should greet.",
      text: "Hello! <tool_call>",
      calls: [],
    },
  );
  const inline = "<think>hmm</think>Hi";
  assertEquals(readEverySplit({ ...hermes, reasoning: "inline" }, inline), {
    reasoning: "",
    text: inline,
    calls: [],
  });
  // Only a turn that begins with <think> reasons; an unclosed one is all reasoning.
  assertEquals(readEverySplit(hermes, "Hi <think>x</think>").text, "Hi <think>x</think>");
  assertEquals(
    readEverySplit(hermes, "  <think>still thinking</thi").reasoning,
    "still thinking</thi",
  );
});

const llama3: Options = { format: "llama3", reasoning: "split", toolsEnabled: true };

Deno.test("llama3: a JSON call, with or without <|python_tag|>, several separated by ';'", () => {
  assertEquals(
    readEverySplit(llama3, '{"name": "get_weather", "parameters": {"city": "Oslo"}}').calls,
    calls(["get_weather", '{"city": "Oslo"}']),
  );
  const turn = readEverySplit(
    llama3,
    '<|python_tag|>{"type": "function", "name": "a", "arguments": {"x": 1}}; {"name": "b", "parameters": {}}',
  );
  assertEquals(turn.calls, calls(["a", '{"x": 1}'], ["b", "{}"]));
  assertEquals(turn.text, "");
});

Deno.test("llama3: answers that are not calls are text", () => {
  for (
    const output of [
      "The weather is fine.",
      '{"name": "Ada", "age": 36}',
      '{"answer": 42}',
      "<|python_tag|>print(1)",
      "  {not json}",
    ]
  ) {
    assertEquals(
      readEverySplit(llama3, output),
      { reasoning: "", text: output, calls: [] },
      output,
    );
  }
});

const mistral: Options = { format: "mistral", reasoning: "split", toolsEnabled: true };

Deno.test("mistral: the array form and the [ARGS] form", () => {
  assertEquals(
    readEverySplit(
      mistral,
      '[TOOL_CALLS] [{"name": "a", "arguments": {"q": "x"}}, {"name": "b", "arguments": {}}]',
    ).calls,
    calls(["a", '{"q": "x"}'], ["b", "{}"]),
  );
  const turn = readEverySplit(
    mistral,
    'Checking.[TOOL_CALLS]get_weather[ARGS]{"city": "Rome"}[TOOL_CALLS]get_time[ARGS]{}',
  );
  assertEquals(turn.text, "Checking.");
  assertEquals(turn.calls, calls(["get_weather", '{"city": "Rome"}'], ["get_time", "{}"]));
  // A name cut off before [ARGS], and text that only resembles the marker, are text.
  assertEquals(readEverySplit(mistral, "[TOOL_CALLS]get_we").text, "[TOOL_CALLS]get_we");
  assertEquals(readEverySplit(mistral, "[TOOL] x").text, "[TOOL] x");
  assertEquals(readEverySplit(mistral, "[TOOL_CALLS]bad name[ARGS]{}").calls, []);
});

const generic: Options = { format: "generic", reasoning: "split", toolsEnabled: true };

Deno.test("generic: tool_calls, a response streamed as decoded text, or plain text", () => {
  const turn = readEverySplit(
    generic,
    '{"tool_calls": [{"name": "a", "arguments": {"x": [1]}}, {"name": "b", "arguments": {}}]}',
  );
  assertEquals(turn.calls, calls(["a", '{"x": [1]}'], ["b", "{}"]));
  assertEquals(turn.text, "");
  assertEquals(
    readEverySplit(generic, '{"response": "Hi \\"you\\"\\n\\ud83d\\ude00 \\u00e9"}'),
    { reasoning: "", text: 'Hi "you"\n\u{1f600} é', calls: [] },
  );
  for (const output of ["Just text.", '{"other": 1}', '{"responses": 1}']) {
    assertEquals(readEverySplit(generic, output).text, output);
  }
});

Deno.test("generic: a response is streamed as it is written", () => {
  const parser = new AssistantParser(generic);
  assertEquals(parser.push('{"response": "Hel'), [{ type: "text", text: "Hel" }]);
  assertEquals(parser.push("lo\\u00"), [{ type: "text", text: "lo" }]);
  assertEquals(parser.push('e9"}'), [{ type: "text", text: "é" }]);
  assertEquals(parser.flush(), []);
  assertEquals(parser.finish("stop"), "stop");
});

Deno.test("call ids are OpenAI's: call_ and 24 random characters", () => {
  const parser = new AssistantParser(hermes);
  const events = parser.push('<tool_call>{"name": "f", "arguments": {}}</tool_call>');
  const call = events.find((e) => e.type === "tool_call");
  assert(call && call.type === "tool_call");
  assert(/^call_[A-Za-z0-9]{24}$/.test(call.id), call.id);
});
