// Constrained chat turns over HTTP on the tiny model (random weights: only the grammar makes its
// answers valid): json_schema answers that parse and validate at temperature 1 over several
// seeds, json_object, forced tool calls (required and named) streamed as OpenAI streams them, in
// the generic format and in Hermes markup, a tool round trip, and the sampling controls.

import type OpenAI from "openai";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { MODEL_ID, startServer } from "../harness.ts";
import { HERMES_TEMPLATE, weather } from "./chat_fixtures.ts";

const schema = {
  type: "object",
  properties: {
    name: { type: "string", pattern: "^[a-z]{1,6}$" },
    count: { type: "integer", minimum: 0, maximum: 99 },
    tags: { type: "array", items: { enum: ["a", "b"] }, maxItems: 3 },
    ok: { type: "boolean" },
  },
  required: ["name", "count", "tags", "ok"],
  additionalProperties: false,
};

function checkAnswer(text: string) {
  const v = JSON.parse(text);
  assertEquals(Object.keys(v).sort(), ["count", "name", "ok", "tags"], text);
  assert(/^[a-z]{1,6}$/.test(v.name), text);
  assert(Number.isInteger(v.count) && v.count >= 0 && v.count <= 99, text);
  assert(Array.isArray(v.tags) && v.tags.length <= 3, text);
  assert(v.tags.every((t: unknown) => t === "a" || t === "b"), text);
  assertEquals(typeof v.ok, "boolean", text);
}

const ask = { role: "user" as const, content: "describe the river as JSON" };

Deno.test("chat structured: json_schema answers validate at temperature 1", async () => {
  const s = await startServer();
  try {
    for (let seed = 1; seed <= 5; seed++) {
      const r = await s.client.chat.completions.create({
        model: MODEL_ID,
        messages: [ask],
        temperature: 1,
        seed,
        max_tokens: 200,
        response_format: { type: "json_schema", json_schema: { name: "river", schema } },
      });
      assertEquals(r.choices[0].finish_reason, "stop", r.choices[0].message.content ?? "");
      checkAnswer(r.choices[0].message.content!);
    }
    // vLLM's and llama.cpp's spellings run the same constraint.
    for (const ext of [{ guided_json: schema }, { json_schema: schema }]) {
      const res = await s.post("/v1/chat/completions", {
        model: MODEL_ID,
        messages: [ask],
        seed: 7,
        max_tokens: 200,
        ...ext,
      });
      const json = await res.json();
      assertEquals(res.status, 200, JSON.stringify(json));
      checkAnswer(json.choices[0].message.content);
    }
    const obj = await s.client.chat.completions.create({
      model: MODEL_ID,
      messages: [ask],
      seed: 3,
      max_tokens: 200,
      response_format: { type: "json_object" },
    });
    if (obj.choices[0].finish_reason === "stop") {
      const v = JSON.parse(obj.choices[0].message.content!);
      assert(typeof v === "object" && v !== null && !Array.isArray(v));
    }
  } finally {
    await s.close();
  }
});

Deno.test("chat structured: bad constraints are a 400 naming the field", async () => {
  const s = await startServer();
  try {
    const chat = { model: MODEL_ID, messages: [ask], max_tokens: 2 };
    const bad: [object, string][] = [
      [{
        response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: 5 } } },
      }, "response_format"],
      [{ response_format: { type: "json_object" }, guided_regex: "a+" }, "response_format"],
      [{ guided_grammar: "" }, "guided_grammar"],
      [{ response_format: { type: "json_object" }, tools: [weather] }, "response_format"],
    ];
    for (const [fields, param] of bad) {
      const res = await s.post("/v1/chat/completions", { ...chat, ...fields });
      const json = await res.json();
      assertEquals(res.status, 400, `${JSON.stringify(fields)}: ${JSON.stringify(json)}`);
      assertEquals(json.error.param, param, JSON.stringify(json));
    }
  } finally {
    await s.close();
  }
});

/** A streamed turn's tool calls, gathered as a client does. */
async function streamedCalls(
  client: OpenAI,
  body: OpenAI.ChatCompletionCreateParamsStreaming,
) {
  const calls: { id: string; name: string; arguments: string }[] = [];
  let finish: string | null = null;
  let content = "";
  for await (const chunk of await client.chat.completions.create(body)) {
    for (const ch of chunk.choices) {
      content += ch.delta.content ?? "";
      finish = ch.finish_reason ?? finish;
      for (const d of ch.delta.tool_calls ?? []) {
        if (d.id) {
          // A call opens with its id, type and name, before any of its arguments.
          assertEquals(d.type, "function");
          assertEquals(d.index, calls.length);
          calls.push({ id: d.id, name: d.function!.name!, arguments: d.function!.arguments ?? "" });
        } else calls[d.index].arguments += d.function?.arguments ?? "";
      }
    }
  }
  return { calls, finish, content };
}

// The generic format's calls are a JSON schema; Hermes's a structural tag with the arguments'
// schemas inside (runtime/grammar/spec.ts compiles those compact).
for (
  const [label, chatTemplate] of [
    ["generic", undefined],
    ["hermes", HERMES_TEMPLATE],
  ] as const
) {
  Deno.test({
    name: `chat structured: forced tool calls (${label}), streamed, and a round trip`,
  }, async () => {
    const s = await startServer({ chatTemplate });
    try {
      const clock = {
        type: "function" as const,
        function: { name: "get_time", parameters: { type: "object", properties: {} } },
      };
      const messages: OpenAI.ChatCompletionMessageParam[] = [
        { role: "user", content: "weather in Oslo?" },
      ];
      for (let seed = 1; seed <= 3; seed++) {
        for (
          const tool_choice of [
            "required",
            { type: "function", function: { name: "get_weather" } },
          ] as const
        ) {
          const { calls, finish } = await streamedCalls(s.client, {
            model: MODEL_ID,
            messages,
            tools: [weather as OpenAI.ChatCompletionTool, clock],
            tool_choice,
            parallel_tool_calls: false,
            seed,
            max_tokens: 120,
            stream: true,
          });
          assertEquals(finish, "tool_calls", JSON.stringify(calls));
          assertEquals(calls.length, 1);
          const args = JSON.parse(calls[0].arguments);
          if (typeof tool_choice === "object" || calls[0].name === "get_weather") {
            assertEquals(calls[0].name, "get_weather");
            assert(/^[A-Za-z ]{1,20}$/.test(args.city), calls[0].arguments);
          } else assertEquals(calls[0].name, "get_time");
        }
      }
      // Whole: content null, the call in message.tool_calls; then its result goes back.
      const r = await s.client.chat.completions.create({
        model: MODEL_ID,
        messages,
        tools: [weather as OpenAI.ChatCompletionTool],
        tool_choice: "required",
        parallel_tool_calls: false,
        seed: 9,
        max_tokens: 200,
      });
      const message = r.choices[0].message;
      assertEquals(r.choices[0].finish_reason, "tool_calls");
      assertEquals(message.content, null);
      const call = message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
      assertEquals(call.function.name, "get_weather");
      const next = await s.client.chat.completions.create({
        model: MODEL_ID,
        messages: [
          ...messages,
          message,
          { role: "tool", tool_call_id: call.id, content: "rain, 4 C" },
        ],
        tools: [weather as OpenAI.ChatCompletionTool],
        max_tokens: 8,
      });
      assert(["stop", "length", "tool_calls"].includes(next.choices[0].finish_reason));
    } finally {
      await s.close();
    }
  });
}

Deno.test("chat structured: sampling controls reach the sampler", async () => {
  // The GPU's sampler is the subject (the fake engine has no logit bias).
  const s = await startServer({ gpu: true });
  try {
    const body = {
      model: MODEL_ID,
      messages: [ask],
      max_tokens: 5,
      temperature: 1,
      seed: 5,
      ignore_eos: true,
      logprobs: true,
      return_tokens_as_token_ids: true,
    };
    // A bias of 100 makes one id certain.
    const r = await (await s.post("/v1/chat/completions", { ...body, logit_bias: { "300": 100 } }))
      .json();
    const ids = r.choices[0].logprobs.content.map((t: { token: string }) => t.token);
    assertEquals(ids, Array(5).fill("token_id:300"));
    // The other controls are accepted (their effect is the sampler's tests').
    const res = await s.post("/v1/chat/completions", {
      ...body,
      frequency_penalty: 1,
      presence_penalty: 0.5,
      repetition_penalty: 1.3,
      min_p: 0.05,
    });
    assertEquals(res.status, 200, JSON.stringify(await res.json()));
    const bad = await s.post("/v1/chat/completions", { ...body, logit_bias: { "99999": 1 } });
    assertEquals([bad.status, (await bad.json()).error.param], [400, "logit_bias"]);
  } finally {
    await s.close();
  }
});
