// The Ollama API's parts without a server: keep_alive as Ollama parses it (Go durations, seconds,
// negative for ever), the options' refusals, and the translation of a chat onto chat completions'
// body (ids for Ollama's id-less calls, tool messages matched to them, format and think).

import { assertEquals, assertThrows } from "../../helpers/testing.ts";
import { ApiError } from "../../../server/openai/errors.ts";
import { goDurationMs, keepAliveField } from "../../../server/ollama/keep_alive.ts";
import { OllamaOptions, samplingFields } from "../../../server/ollama/options.ts";
import { OllamaChatRequest } from "../../../server/ollama/schema.ts";
import { toChat } from "../../../server/ollama/to_chat.ts";

Deno.test("ollama keep_alive: Go durations, seconds, 0, and negative for ever", () => {
  assertEquals(goDurationMs("5m"), 300_000);
  assertEquals(goDurationMs("1.5h"), 5_400_000);
  assertEquals(goDurationMs("2h45m"), 9_900_000);
  assertEquals(goDurationMs("300ms"), 300);
  assertEquals(goDurationMs("0"), 0);
  assertEquals(goDurationMs("-1m"), -60_000);
  for (const bad of ["", "5", "m", "5 minutes", "1h 30m", "5d", "--1s"]) {
    assertEquals(goDurationMs(bad), null, bad);
  }
  const parse = (v: unknown) => keepAliveField.parse(v);
  assertEquals(parse(300), { ms: 300_000 });
  assertEquals(parse(0), { ms: 0 });
  assertEquals(parse(-1), { ms: null });
  assertEquals(parse("-1s"), { ms: null });
  assertEquals(parse("10m"), { ms: 600_000 });
  assertEquals(keepAliveField.safeParse("forever").success, false);
  assertEquals(keepAliveField.safeParse(true).success, false);
});

Deno.test("ollama options: run, accepted without effect, or refused", () => {
  const ok = (o: object) => OllamaOptions.safeParse(o).success;
  assertEquals(ok({ temperature: 0.7, top_k: 40, top_p: 0.9, min_p: 0.05, seed: 3 }), true);
  assertEquals(ok({ num_thread: 8, num_gpu: 99, use_mmap: true, num_batch: 512 }), true);
  assertEquals(ok({ mirostat: 0, tfs_z: 1, typical_p: 1 }), true, "neutral values");
  assertEquals(ok({ mirostat: 1 }), false);
  assertEquals(ok({ typical_p: 0.5 }), false);
  assertEquals(ok({ tempurature: 1 }), false, "an option Ollama does not have");
  assertEquals(ok({ temperature: 3 }), false);
  assertEquals(ok({ num_predict: 0 }), false);
  assertEquals(ok({ num_predict: -1 }), true);
  // A penalty window other than the whole sequence changes the answer: only with no penalty.
  assertEquals(ok({ repeat_last_n: 64 }), true);
  assertEquals(ok({ repeat_last_n: 64, repeat_penalty: 1.1 }), false);
  assertEquals(ok({ repeat_last_n: -1, repeat_penalty: 1.1 }), true);
  assertEquals(
    samplingFields({ num_predict: -1, stop: ["\n"], repeat_penalty: 1.2 }),
    {
      temperature: undefined,
      top_p: undefined,
      top_k: undefined,
      min_p: undefined,
      seed: undefined,
      max_tokens: undefined,
      stop: ["\n"],
      repetition_penalty: 1.2,
      presence_penalty: undefined,
      frequency_penalty: undefined,
    },
  );
});

Deno.test("ollama chat: calls get ids, tool messages answer them by name", () => {
  const body = OllamaChatRequest.parse({
    model: "m",
    messages: [
      { role: "user", content: "Weather in Paris and Rome?" },
      {
        role: "assistant",
        content: "",
        tool_calls: [
          { function: { name: "weather", arguments: { city: "Paris" } } },
          { function: { name: "time", arguments: { city: "Rome" } } },
        ],
      },
      { role: "tool", content: "12:00", tool_name: "time" },
      { role: "tool", content: "21 degrees" },
    ],
    format: "json",
    think: true,
  });
  const chat = toChat(body);
  const messages = chat.messages as Record<string, unknown>[];
  const calls = messages[1].tool_calls as { id: string; function: { arguments: string } }[];
  assertEquals(calls.map((c) => c.id), ["call_1_0", "call_1_1"]);
  assertEquals(JSON.parse(calls[0].function.arguments), { city: "Paris" });
  assertEquals(messages[2], { role: "tool", tool_call_id: "call_1_1", content: "12:00" });
  assertEquals(messages[3], { role: "tool", tool_call_id: "call_1_0", content: "21 degrees" });
  assertEquals(chat.response_format, { type: "json_object" });
  assertEquals(chat.reasoning_format, "auto");
  assertEquals(chat.stream, true, "Ollama streams unless told not to");

  const orphan = OllamaChatRequest.parse({
    model: "m",
    messages: [{ role: "tool", content: "21", tool_name: "weather" }],
  });
  assertThrows(() => toChat(orphan), (e) => e instanceof ApiError && e.status === 400);
  const both = OllamaChatRequest.parse({
    model: "m",
    messages: [{ role: "user", content: "hi" }],
    format: { type: "object" },
    tools: [{ type: "function", function: { name: "f" } }],
  });
  assertThrows(() => toChat(both), (e) => e instanceof ApiError && e.status === 400);
});
