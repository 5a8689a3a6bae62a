// Anthropic's SDK, unchanged, against Sluice's /v1/messages: create, stream, a forced tool_use
// with its input valid, and countTokens.

import Anthropic from "@anthropic-ai/sdk";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { MODEL_ID, startServer } from "../harness.ts";
import { MAX_TOKENS, SEEDS, WeatherArgs, weatherParameters } from "./schemas.ts";

// This SDK version no longer types `temperature`; the Messages API still takes it, and Sluice does.
const greedy: object = { temperature: 0 };
const sampled: object = { temperature: 1 };

function client(url: string) {
  return new Anthropic({ baseURL: url, apiKey: "none", maxRetries: 0 });
}

Deno.test("anthropic: messages.create and messages.stream answer with usage", async () => {
  const s = await startServer();
  try {
    const anthropic = client(s.url);
    const made = await anthropic.messages.create({
      model: MODEL_ID,
      max_tokens: 6,
      system: "Be brief.",
      messages: [{ role: "user", content: "Hello" }],
      ...greedy,
    });
    assertEquals(made.type, "message");
    assertEquals(made.role, "assistant");
    assert(["end_turn", "max_tokens"].includes(made.stop_reason!));
    assert(made.usage.input_tokens > 0 && made.usage.output_tokens > 0);

    const stream = anthropic.messages.stream({
      model: MODEL_ID,
      max_tokens: 6,
      system: "Be brief.",
      messages: [{ role: "user", content: "Hello" }],
      ...greedy,
    });
    let text = "";
    stream.on("text", (t) => text += t);
    const final = await stream.finalMessage();
    const block = final.content[0];
    assert(block.type === "text");
    assertEquals(block.text, text, "the streamed deltas add up to the final text");
    assertEquals(block.text, (made.content[0] as { text: string }).text, "greedy: same as create");
  } finally {
    await s.close();
  }
});

Deno.test("anthropic: a forced tool_use has valid input, and its result goes back", async () => {
  const s = await startServer();
  try {
    const anthropic = client(s.url);
    const tools = [{
      name: "get_weather",
      description: "The weather in a city",
      input_schema: weatherParameters as Anthropic.Tool.InputSchema,
    }];
    for (const seed of SEEDS) {
      const reply = await anthropic.messages.create({
        model: MODEL_ID,
        max_tokens: MAX_TOKENS,
        messages: [{ role: "user", content: "Weather in Paris?" }],
        tools,
        tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true },
        ...sampled,
        metadata: { user_id: `seed-${seed}` },
      });
      assertEquals(reply.stop_reason, "tool_use");
      const use = reply.content.find((b) => b.type === "tool_use");
      assert(use && use.type === "tool_use");
      assertEquals(use.name, "get_weather");
      assert(WeatherArgs.safeParse(use.input).success, JSON.stringify(use.input));
      if (seed !== SEEDS[0]) continue;
      const answer = await anthropic.messages.create({
        model: MODEL_ID,
        max_tokens: 6,
        messages: [
          { role: "user", content: "Weather in Paris?" },
          { role: "assistant", content: reply.content },
          {
            role: "user",
            content: [{ type: "tool_result", tool_use_id: use.id, content: "21 degrees" }],
          },
        ],
        tools,
        ...greedy,
      });
      assert(["end_turn", "max_tokens"].includes(answer.stop_reason!));
    }
    // Streamed: the input arrives as input_json_delta fragments.
    const stream = anthropic.messages.stream({
      model: MODEL_ID,
      max_tokens: MAX_TOKENS,
      messages: [{ role: "user", content: "Weather in Paris?" }],
      tools,
      // One call, so that the streamed fragments are one input's.
      tool_choice: { type: "any", disable_parallel_tool_use: true },
      ...sampled,
    });
    let json = "";
    stream.on("inputJson", (partial) => json += partial);
    const final = await stream.finalMessage();
    const use = final.content.find((b) => b.type === "tool_use");
    assert(use && use.type === "tool_use");
    assertEquals(JSON.parse(json), use.input);
    assert(WeatherArgs.safeParse(use.input).success);
  } finally {
    await s.close();
  }
});

Deno.test("anthropic: countTokens counts the rendered prompt, tools included", async () => {
  const s = await startServer();
  try {
    const anthropic = client(s.url);
    const messages = [{ role: "user" as const, content: "Weather in Paris?" }];
    const plain = await anthropic.messages.countTokens({ model: MODEL_ID, messages });
    const made = await anthropic.messages.create({
      model: MODEL_ID,
      max_tokens: 1,
      messages,
      ...greedy,
    });
    assertEquals(plain.input_tokens, made.usage.input_tokens);
    const withTools = await anthropic.messages.countTokens({
      model: MODEL_ID,
      messages,
      tools: [{
        name: "get_weather",
        input_schema: weatherParameters as Anthropic.Tool.InputSchema,
      }],
    });
    assert(withTools.input_tokens > plain.input_tokens, "the tools are part of the prompt");
  } finally {
    await s.close();
  }
});
