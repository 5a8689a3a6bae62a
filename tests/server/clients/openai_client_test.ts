// The official `openai` client, unchanged, against Sluice: structured outputs through
// chat.completions.parse and its stream helper, streamed tool calls with a tool result sent back,
// a named tool, and the Responses API's parse and stream. The model is the random tiny one: only
// the constraint makes its answers parse.

import { zodFunction, zodResponseFormat, zodTextFormat } from "openai/helpers/zod";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { MODEL_ID, startServer } from "../harness.ts";
import { HERMES_TEMPLATE } from "../routes/chat_fixtures.ts";
import { AddArgs, MAX_TOKENS, Person, SEEDS, WeatherArgs } from "./schemas.ts";

const ask = [{ role: "user" as const, content: "Describe a person." }];

Deno.test("openai: chat.completions.parse with a zod schema validates at temperature 1", async () => {
  const s = await startServer();
  try {
    for (const seed of SEEDS) {
      const done = await s.client.chat.completions.parse({
        model: MODEL_ID,
        messages: ask,
        temperature: 1,
        seed,
        max_tokens: MAX_TOKENS,
        response_format: zodResponseFormat(Person, "person"),
      });
      const message = done.choices[0].message;
      assertEquals(done.choices[0].finish_reason, "stop", `seed ${seed}: ${message.content}`);
      assert(message.parsed !== null, `seed ${seed}: nothing parsed from ${message.content}`);
      assert(Person.safeParse(message.parsed).success, `seed ${seed}: ${message.content}`);
    }
  } finally {
    await s.close();
  }
});

Deno.test("openai: the chat stream helper gives a parsed final completion", async () => {
  const s = await startServer();
  try {
    const stream = s.client.chat.completions.stream({
      model: MODEL_ID,
      messages: ask,
      temperature: 1,
      seed: 7,
      max_tokens: MAX_TOKENS,
      response_format: zodResponseFormat(Person, "person"),
    });
    let deltas = 0;
    stream.on("content.delta", () => deltas++);
    const final = await stream.finalChatCompletion();
    assert(deltas > 1, "the answer streamed in pieces");
    assert(Person.safeParse(final.choices[0].message.parsed).success);
  } finally {
    await s.close();
  }
});

// With the tiny model's ChatML template (no tool support: the generic format) and with a Hermes
// template (the model's own <tool_call> syntax, constrained through a structural tag).
for (const [format, chatTemplate] of [["generic", undefined], ["hermes", HERMES_TEMPLATE]]) {
  Deno.test(`openai: a required tool call (${format}) streams as OpenAI's, and its result goes back`, async () => {
    const s = await startServer({ chatTemplate });
    try {
      const tools = [zodFunction({ name: "get_weather", parameters: WeatherArgs })];
      const messages: any[] = [{ role: "user", content: "Weather in Paris?" }];
      for (const seed of SEEDS) {
        const stream = s.client.chat.completions.stream({
          model: MODEL_ID,
          messages,
          tools,
          tool_choice: "required",
          // One call, so that the argument fragments are one call's.
          parallel_tool_calls: false,
          temperature: 1,
          seed,
          max_tokens: MAX_TOKENS,
        });
        const argDeltas: string[] = [];
        stream.on("tool_calls.function.arguments.delta", (e) => argDeltas.push(e.arguments_delta));
        const final = await stream.finalChatCompletion();
        const choice = final.choices[0];
        assertEquals(choice.finish_reason, "tool_calls");
        const call = choice.message.tool_calls![0];
        assert(call.type === "function");
        assertEquals(call.function.name, "get_weather");
        assert(call.id.length > 0);
        assertEquals(
          argDeltas.join(""),
          call.function.arguments,
          "fragments add up to the arguments",
        );
        assert(WeatherArgs.safeParse(JSON.parse(call.function.arguments)).success);
        if (seed !== SEEDS[0]) continue;
        // The round trip: the call and its result in the history, an answer in text.
        const answer = await s.client.chat.completions.create({
          model: MODEL_ID,
          messages: [
            ...messages,
            { role: "assistant", content: null, tool_calls: [call] },
            { role: "tool", tool_call_id: call.id, content: '{"temperature": 21}' },
          ],
          tools,
          tool_choice: "none",
          max_tokens: 8,
          temperature: 0,
        });
        assert(["stop", "length"].includes(answer.choices[0].finish_reason));
        assertEquals(answer.choices[0].message.tool_calls ?? [], []);
      }
    } finally {
      await s.close();
    }
  });
}

Deno.test("openai: a named tool is the one called, with valid arguments", async () => {
  const s = await startServer();
  try {
    for (const seed of SEEDS) {
      const done = await s.client.chat.completions.parse({
        model: MODEL_ID,
        messages: [{ role: "user", content: "Add 2 and 3." }],
        tools: [
          zodFunction({ name: "get_weather", parameters: WeatherArgs }),
          zodFunction({ name: "add", parameters: AddArgs }),
        ],
        tool_choice: { type: "function", function: { name: "add" } },
        temperature: 1,
        seed,
        max_tokens: MAX_TOKENS,
      });
      // Parallel calls are allowed (OpenAI's default): every one must be of `add`, and valid.
      const calls = done.choices[0].message.tool_calls ?? [];
      assert(calls.length >= 1);
      for (const call of calls) {
        assert(call.type === "function");
        assertEquals(call.function.name, "add");
        assert(AddArgs.safeParse(call.function.parsed_arguments).success);
      }
    }
  } finally {
    await s.close();
  }
});

Deno.test("openai: responses.parse and responses.stream give answers that validate", async () => {
  const s = await startServer();
  try {
    for (const seed of SEEDS) {
      const done = await s.client.responses.parse({
        model: MODEL_ID,
        input: "Describe a person.",
        temperature: 1,
        max_output_tokens: MAX_TOKENS,
        text: { format: zodTextFormat(Person, "person") },
        // Sluice's extension: a seed fixes the draw.
        ...({ seed } as object),
      });
      assertEquals(done.status, "completed", done.output_text);
      assert(Person.safeParse(done.output_parsed).success, done.output_text);
    }
    const stream = s.client.responses.stream({
      model: MODEL_ID,
      input: "Describe a person.",
      temperature: 1,
      max_output_tokens: MAX_TOKENS,
      text: { format: zodTextFormat(Person, "person") },
    });
    let deltas = 0;
    stream.on("response.output_text.delta", () => deltas++);
    const final = await stream.finalResponse();
    assert(deltas > 1);
    assert(Person.safeParse(final.output_parsed).success, final.output_text);
  } finally {
    await s.close();
  }
});
