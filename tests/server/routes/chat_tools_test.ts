// Chat completions' agent fields over HTTP on the tiny model: tools rendered by a template that
// shows them (Hermes markup) and, for one that cannot (ChatML), offered in the generic system
// prompt; a history with tool calls and tool results; n choices (each the n = 1 answer of its
// seed, streamed interleaved, usage summed); and the new fields' validation (400 naming them).

import { assert, assertEquals } from "../../helpers/testing.ts";
import { MODEL_ID, sseData, startServer, type TestServer } from "../harness.ts";
import { HERMES_TEMPLATE, weather } from "./chat_fixtures.ts";

const history = [
  { role: "user", content: "weather in Oslo?" },
  {
    role: "assistant",
    content: null,
    tool_calls: [{
      id: "call_1",
      type: "function",
      function: { name: "get_weather", arguments: '{"city":"Oslo"}' },
    }],
  },
  { role: "tool", tool_call_id: "call_1", content: "rain, 4 C" },
];

/** The prompt text the server renders for a chat body (via /tokenize and /detokenize). */
async function rendered(s: TestServer, body: object): Promise<string> {
  const res = await s.post("/tokenize", body);
  const json = await res.json();
  assertEquals(res.status, 200, JSON.stringify(json));
  const text = await s.post("/detokenize", { tokens: json.tokens });
  return (await text.json()).prompt;
}

Deno.test("chat tools: a template that shows tools gets them, and the calls of the history", async () => {
  const s = await startServer({ chatTemplate: HERMES_TEMPLATE });
  try {
    const prompt = await rendered(s, { messages: history, tools: [weather] });
    assert(prompt.includes("<tools>") && prompt.includes('"name": "get_weather"'), prompt);
    assert(prompt.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}'));
    assert(prompt.includes("<tool_response>\nrain, 4 C\n</tool_response>"), prompt);
    assert(!(await rendered(s, { messages: history })).includes("<tools>"));
    // The same body runs: auto lets the model answer or call.
    const res = await s.post("/v1/chat/completions", {
      model: MODEL_ID,
      messages: history,
      tools: [weather],
      tool_choice: "auto",
      max_tokens: 6,
    });
    const json = await res.json();
    assertEquals(res.status, 200, JSON.stringify(json));
    assert(["stop", "length", "tool_calls"].includes(json.choices[0].finish_reason));
  } finally {
    await s.close();
  }
});

Deno.test("chat tools: a template that cannot show tools gets the generic prompt", async () => {
  const s = await startServer();
  try {
    const prompt = await rendered(s, { messages: history, tools: [weather] });
    assert(prompt.includes("You can call these tools"), prompt);
    assert(prompt.includes('"get_weather"'), prompt);
    // The earlier call is written as the generic format's answer.
    assert(prompt.includes('{"tool_calls":[{"name":"get_weather","arguments":{"city":"Oslo"}}]}'));
    assert(prompt.includes("<|im_start|>tool\nrain, 4 C"), prompt);
    // Without tools, no offer.
    assert(!(await rendered(s, { messages: history })).includes("You can call these tools"));
    const res = await s.post("/v1/chat/completions", {
      model: MODEL_ID,
      messages: history,
      tools: [weather],
      tool_choice: "none",
      max_tokens: 4,
    });
    assertEquals(res.status, 200, JSON.stringify(await res.json()));
  } finally {
    await s.close();
  }
});

Deno.test("chat: n choices are the n = 1 answers of seeds seed, seed+1, …", async () => {
  const s = await startServer({ runtime: { prefixCache: true } });
  try {
    const body = {
      model: MODEL_ID,
      messages: [{ role: "user", content: "tell me about the river" }],
      max_tokens: 8,
      temperature: 1,
      seed: 40,
    };
    const r = await (await s.post("/v1/chat/completions", { ...body, n: 3 })).json();
    assertEquals(r.choices.map((c: { index: number }) => c.index), [0, 1, 2]);
    // Choices 2 and 3 found choice 1's whole prompt blocks in the prefix cache.
    const blocks = Math.floor(r.usage.prompt_tokens / s.runtime.info.blockSize);
    assert(blocks >= 1, "the prompt fills a block");
    assertEquals(s.runtime.stats().prefix?.hitBlocks, 2 * blocks);
    let completion = 0;
    for (const [i, choice] of r.choices.entries()) {
      const one = await (await s.post("/v1/chat/completions", { ...body, seed: 40 + i })).json();
      assertEquals(choice.message.content, one.choices[0].message.content, `choice ${i}`);
      completion += one.usage.completion_tokens;
    }
    assertEquals(r.usage.completion_tokens, completion);
    assertEquals(
      r.usage.prompt_tokens,
      (await (await s.post("/v1/chat/completions", body)).json())
        .usage.prompt_tokens,
    );

    // Streamed: every chunk names its choice; each choice opens, streams, and finishes once.
    const res = await s.post("/v1/chat/completions", {
      ...body,
      n: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    const events = await sseData(res);
    assertEquals(events.at(-1), "[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    const text = ["", "", ""];
    const finishes = [0, 0, 0];
    for (const chunk of chunks.slice(0, -1)) {
      assertEquals(chunk.choices.length, 1);
      const c = chunk.choices[0];
      text[c.index] += c.delta.content ?? "";
      if (c.finish_reason) finishes[c.index]++;
    }
    assertEquals(finishes, [1, 1, 1]);
    assertEquals(text, r.choices.map((c: { message: { content: string } }) => c.message.content));
    assertEquals(chunks.at(-1).usage, r.usage);
  } finally {
    await s.close();
  }
});

Deno.test("chat: the agent fields are validated, a 400 naming the field", async () => {
  const s = await startServer();
  try {
    const chat = { model: MODEL_ID, messages: [{ role: "user", content: "x" }], max_tokens: 2 };
    const bad: [object, string][] = [
      [{ n: 0 }, "n"],
      [{ n: 9 }, "n"],
      [{ presence_penalty: 2.5 }, "presence_penalty"],
      [{ frequency_penalty: -3 }, "frequency_penalty"],
      [{ repetition_penalty: 0 }, "repetition_penalty"],
      [{ min_p: 1.5 }, "min_p"],
      [{ logit_bias: { "5": 101 } }, "logit_bias.5"],
      [{ logit_bias: { "x": 1 } }, "logit_bias.x"],
      [{ tools: [{ type: "function", function: { name: "bad name" } }] }, "tools.0.function.name"],
      [
        { tools: [weather], tool_choice: { type: "function", function: { name: "nope" } } },
        "tool_choice",
      ],
      [{ tool_choice: "required" }, "tool_choice"],
      [{ response_format: { type: "yaml" } }, "response_format.type"],
      [{ reasoning_format: "loud" }, "reasoning_format"],
      [{ messages: [{ role: "tool", content: "x" }] }, "messages.0.tool_call_id"],
      [
        { messages: [{ role: "user", content: "x", tool_calls: history[1].tool_calls }] },
        "messages.0.tool_calls",
      ],
      [{ messages: [{ role: "user", content: null }] }, "messages.0.content"],
      [{
        messages: [{
          ...history[1],
          tool_calls: [{ ...history[1].tool_calls![0], function: { name: "f", arguments: "[1]" } }],
        }],
      }, "messages.0.tool_calls.0.function.arguments"],
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
