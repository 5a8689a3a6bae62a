// The Vercel AI SDK, unchanged, against Sluice through its OpenAI-compatible provider: an object
// from a zod schema, and a tool call the SDK executes and answers.

import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, Output, stepCountIs, streamText, tool } from "ai";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { MODEL_ID, startServer } from "../harness.ts";
import { MAX_TOKENS, Person, SEEDS, WeatherArgs } from "./schemas.ts";

function provider(url: string) {
  return createOpenAICompatible({
    name: "sluice",
    baseURL: `${url}/v1`,
    apiKey: "none",
    supportsStructuredOutputs: true,
  });
}

Deno.test("ai sdk: an object from a zod schema (Output.object) validates, over 5 seeds", async () => {
  const s = await startServer();
  try {
    const model = provider(s.url)(MODEL_ID);
    for (const seed of SEEDS) {
      // generateText with an object output: what AI SDK 7 has in place of generateObject.
      const { output: object, finishReason } = await generateText({
        model,
        output: Output.object({ schema: Person }),
        prompt: "Describe a person.",
        temperature: 1,
        seed,
        maxOutputTokens: MAX_TOKENS,
        maxRetries: 0,
      });
      assertEquals(finishReason, "stop");
      assert(Person.safeParse(object).success);
    }
  } finally {
    await s.close();
  }
});

Deno.test("ai sdk: a tool call is executed and its result answered, streamed and not", async () => {
  const s = await startServer({ runtime: { maxTokensLimit: 1024 } });
  try {
    const model = provider(s.url)(MODEL_ID);
    const calls: unknown[] = [];
    const tools = {
      get_weather: tool({
        description: "The weather in a city",
        inputSchema: WeatherArgs,
        execute: (args) => {
          calls.push(args);
          return Promise.resolve({ temperature: 21 });
        },
      }),
    };
    const common = {
      model,
      tools,
      prompt: "Weather in Paris?",
      temperature: 1,
      seed: 3,
      // Room for the most parallel calls a turn may make (8), each with its longest arguments.
      maxOutputTokens: 2 * MAX_TOKENS,
      maxRetries: 0,
      stopWhen: stepCountIs(2),
      // Step 1 must call the tool; step 2 answers in (a little) text.
      prepareStep: ({ stepNumber }: { stepNumber: number }) =>
        stepNumber === 0
          ? { toolChoice: "required" as const }
          : { toolChoice: "none" as const, maxOutputTokens: 8 },
    };
    const result = await generateText(common);
    // Parallel calls are allowed: the SDK runs each one.
    assert(calls.length >= 1, "the SDK ran the tool");
    assertEquals(calls.length, result.steps[0].toolCalls.length);
    for (const args of calls) assert(WeatherArgs.safeParse(args).success);
    assertEquals(result.steps.length, 2);
    assertEquals(result.steps[0].finishReason, "tool-calls");

    const before = calls.length;
    const streamed = streamText({ ...common, seed: 4 });
    const parts: string[] = [];
    for await (const part of streamed.fullStream) parts.push(part.type);
    assert(calls.length > before, "the streamed calls ran too");
    for (const args of calls) assert(WeatherArgs.safeParse(args).success);
    assert(parts.includes("tool-call") && parts.includes("tool-result"), parts.join(","));
  } finally {
    await s.close();
  }
});
