// LangChain's ChatOpenAI, unchanged, against Sluice: withStructuredOutput (JSON schema mode) and
// bindTools with a forced call.

import { ChatOpenAI } from "@langchain/openai";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { MODEL_ID, startServer } from "../harness.ts";
import { MAX_TOKENS, Person, SEEDS, WeatherArgs } from "./schemas.ts";

function chat(url: string, seed: number) {
  return new ChatOpenAI({
    model: MODEL_ID,
    apiKey: "none",
    configuration: { baseURL: `${url}/v1` },
    temperature: 1,
    maxTokens: MAX_TOKENS,
    maxRetries: 0,
    modelKwargs: { seed },
  });
}

Deno.test("langchain: withStructuredOutput validates over 5 seeds", async () => {
  const s = await startServer();
  try {
    for (const seed of SEEDS) {
      const structured = chat(s.url, seed).withStructuredOutput(Person, {
        name: "person",
        method: "jsonSchema",
      });
      const person = await structured.invoke("Describe a person.");
      assert(Person.safeParse(person).success, JSON.stringify(person));
    }
  } finally {
    await s.close();
  }
});

Deno.test("langchain: bindTools with a required call gives a valid tool call", async () => {
  const s = await startServer();
  try {
    for (const seed of SEEDS) {
      const withTools = chat(s.url, seed).bindTools(
        [{ name: "get_weather", description: "The weather in a city", schema: WeatherArgs }],
        { tool_choice: "required" },
      );
      const reply = await withTools.invoke("Weather in Paris?");
      // Parallel calls are allowed: at least one, every one valid.
      assert((reply.tool_calls?.length ?? 0) >= 1);
      for (const call of reply.tool_calls!) {
        assertEquals(call.name, "get_weather");
        assert(WeatherArgs.safeParse(call.args).success, JSON.stringify(call.args));
      }
    }
  } finally {
    await s.close();
  }
});
