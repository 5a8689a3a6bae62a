// /v1/chat/completions and /v1/completions over HTTP, driven by the official `openai` client and by
// raw fetch: both endpoints streamed and not, logprobs (by text and by token id), stop strings,
// SSE framing, the reading rate's range, fields refused unless neutral, and concurrent streams
// against the same requests run alone.

import type OpenAI from "openai";
import { MAX_READING_RATE, MIN_READING_RATE } from "../../../runtime/service.ts";
import { assert, assertEquals, assertMatch } from "../../helpers/testing.ts";
import { MODEL_ID, sseData, startServer } from "../harness.ts";

Deno.test("completions: openai client, chat and completions, stream and not", async (t) => {
  // The tiny model on the GPU: its greedy tokens here are whole characters, so a completion's text
  // is its logprobs' tokens joined (the fake engine's random ids split UTF-8 across tokens).
  const s = await startServer({ gpu: true });
  try {
    await t.step("models", async () => {
      const models = await s.client.models.list();
      assertEquals(models.data.map((m) => m.id), [MODEL_ID]);
    });
    await t.step("chat, non-streaming", async () => {
      const r = await s.client.chat.completions.create({
        model: MODEL_ID,
        messages: [{ role: "user", content: "hello there" }],
        max_tokens: 8,
        temperature: 0,
      });
      assertEquals(r.object, "chat.completion");
      assert(r.id.startsWith("chatcmpl-"));
      assertEquals(r.choices[0].message.role, "assistant");
      assert(["stop", "length"].includes(r.choices[0].finish_reason));
      assertEquals(r.usage!.total_tokens, r.usage!.prompt_tokens + r.usage!.completion_tokens);
      assert(r.usage!.completion_tokens <= 8);
    });
    await t.step("chat, streaming equals non-streaming at temperature 0", async () => {
      const body = {
        model: MODEL_ID,
        messages: [{ role: "user" as const, content: "tell me" }],
        max_tokens: 12,
        temperature: 0,
      };
      const whole = await s.client.chat.completions.create(body);
      const stream = await s.client.chat.completions.create({
        ...body,
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = "";
      let finish: string | null = null;
      let usage: OpenAI.CompletionUsage | undefined;
      let role: string | undefined;
      for await (const chunk of stream) {
        assertEquals(chunk.object, "chat.completion.chunk");
        if (chunk.usage) usage = chunk.usage;
        for (const ch of chunk.choices) {
          role ??= ch.delta.role;
          text += ch.delta.content ?? "";
          finish = ch.finish_reason ?? finish;
        }
      }
      assertEquals(role, "assistant", "the first chunk carries the role");
      assertEquals(text, whole.choices[0].message.content);
      assertEquals(finish, whole.choices[0].finish_reason);
      assertEquals(usage, whole.usage, "include_usage sends the same usage");
    });
    await t.step("completions with token ids and logprobs", async () => {
      const r = await s.client.completions.create({
        model: MODEL_ID,
        prompt: [5, 6, 7, 8],
        max_tokens: 6,
        temperature: 0,
        logprobs: 3,
      });
      assertEquals(r.object, "text_completion");
      assert(r.id.startsWith("cmpl-"));
      const lp = r.choices[0].logprobs!;
      assertEquals(lp.tokens!.length, lp.token_logprobs!.length);
      for (const [i, top] of lp.top_logprobs!.entries()) {
        assertEquals(Object.keys(top).length > 0, true);
        assert(lp.token_logprobs![i] <= 0);
      }
      assertEquals(r.choices[0].text, lp.tokens!.join(""));
      assertEquals(lp.text_offset![0], 0);
    });
    await t.step("completions default to 16 tokens", async () => {
      const r = await s.client.completions.create(
        { model: MODEL_ID, prompt: "abc", temperature: 0, ignore_eos: true } as never,
      );
      assertEquals(r.usage!.completion_tokens, 16);
    });
    await t.step("chat logprobs", async () => {
      const r = await s.client.chat.completions.create({
        model: MODEL_ID,
        messages: [{ role: "user", content: "x" }],
        max_tokens: 4,
        temperature: 0,
        logprobs: true,
        top_logprobs: 2,
        ignore_eos: true,
      } as never) as OpenAI.Chat.ChatCompletion;
      const content = r.choices[0].logprobs!.content!;
      assert(content.length > 0);
      for (const c of content) {
        assertEquals(c.top_logprobs.length, 2);
        assertEquals(c.top_logprobs[0].token, c.token, "greedy token is the most likely");
      }
    });
    await t.step("stop strings end the text before the stop", async () => {
      const ask = (stop?: string) =>
        s.client.completions.create(
          {
            model: MODEL_ID,
            prompt: [9, 10, 11],
            max_tokens: 20,
            temperature: 0,
            stop,
            ignore_eos: true,
          } as never,
        );
      const text = (await ask()).choices[0].text;
      assert(text.length > 4, `need some text to cut (${JSON.stringify(text)})`);
      const stop = text.slice(3, 5);
      const cut = await ask(stop);
      assertEquals(cut.choices[0].text, text.slice(0, text.indexOf(stop)));
      assertEquals(cut.choices[0].finish_reason, "stop");
    });
    await t.step("raw SSE framing: chunks, finish, usage, then [DONE]", async () => {
      const res = await s.post("/v1/completions", {
        model: MODEL_ID,
        prompt: "abc",
        max_tokens: 5,
        stream: true,
        temperature: 0,
        ignore_eos: true,
        stream_options: { include_usage: true },
      });
      assertEquals(res.status, 200);
      const data = await sseData(res);
      assertEquals(data.at(-1), "[DONE]");
      const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
      for (const c of chunks) assertEquals(c.object, "text_completion");
      assertEquals(chunks.at(-1).usage.completion_tokens, 5);
      assertEquals(chunks.at(-1).choices, []);
      assertEquals(chunks.at(-2).choices[0].finish_reason, "length");
      const ids = chunks.slice(0, -2).flatMap((c) => c.choices[0].token_ids);
      assertEquals(ids.length, 5, "token_ids count every token once");
      for (const c of chunks.slice(0, -2)) assertEquals(c.choices[0].finish_reason, null);
    });
  } finally {
    await s.close();
  }
});

Deno.test("completions: reading_rate must be 0 (unpaced) or lie in the token buffer's range", async () => {
  const s = await startServer();
  try {
    const ask = (reading_rate: unknown) =>
      s.post("/v1/completions", {
        model: MODEL_ID,
        prompt: "abc",
        max_tokens: 3,
        reading_rate,
        ignore_eos: true,
      });
    // 1e-7 tokens/s once asked its pacer for a timer past 2^31 ms, which fires at once: a spin.
    for (const rate of [1e-7, MIN_READING_RATE / 2, -1, MAX_READING_RATE * 2, "fast"]) {
      const res = await ask(rate);
      const body = await res.json();
      assertEquals(res.status, 400, `reading_rate ${rate}`);
      assertEquals(body.error.param, "reading_rate");
      assertEquals(body.error.type, "invalid_request_error");
    }
    for (const rate of [100, 0]) {
      const res = await ask(rate);
      assertEquals(res.status, 200, `reading_rate ${rate}`);
      assertEquals((await res.json()).usage.completion_tokens, 3);
    }
  } finally {
    await s.close();
  }
});

Deno.test("completions: 16 concurrent streams match the same requests run alone", async () => {
  const s = await startServer();
  try {
    const req = (i: number) => ({
      model: MODEL_ID,
      prompt: [1 + i, 2 + 2 * i, 3 + i],
      max_tokens: 10 + i,
      temperature: 0,
      ignore_eos: true,
    });
    const alone: string[] = [];
    for (let i = 0; i < 16; i++) {
      alone.push((await s.client.completions.create(req(i) as never)).choices[0].text);
    }
    const together = await Promise.all(Array.from({ length: 16 }, async (_, i) => {
      const stream = await s.client.completions.create(
        { ...req(i), stream: true } as never,
      ) as unknown as AsyncIterable<{ choices: { text: string }[] }>;
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
      return text;
    }));
    assertEquals(together, alone);
  } finally {
    await s.close();
  }
});

Deno.test("completions: return_tokens_as_token_ids keeps all K top logprobs, named token_id:N", async (t) => {
  const s = await startServer();
  try {
    const K = 20;
    const body = {
      model: MODEL_ID,
      prompt: [5, 6, 7, 8],
      max_tokens: 8,
      temperature: 0,
      logprobs: K,
      ignore_eos: true,
    };
    const complete = async (extra: object) => {
      const res = await s.post("/v1/completions", { ...body, ...extra });
      assertEquals(res.status, 200);
      return (await res.json()).choices[0];
    };
    const byText = await complete({});
    await t.step("by text, tokens that decode alike share one key", () => {
      // The tiny model's byte tokens 128-255 all decode to U+FFFD on their own.
      const sizes = byText.logprobs.top_logprobs.map((top: object) => Object.keys(top).length);
      assert(sizes.some((n: number) => n < K), `some step lost keys (${sizes})`);
    });
    await t.step("by id, every step has exactly K keys", async () => {
      const byId = await complete({ return_tokens_as_token_ids: true });
      const lp = byId.logprobs;
      assertEquals(byId.text, byText.text);
      assertEquals(lp.text_offset, byText.logprobs.text_offset, "offsets count decoded text");
      for (const [i, top] of lp.top_logprobs.entries()) {
        const keys = Object.keys(top);
        assertEquals(keys.length, K, `step ${i}`);
        for (const key of keys) assertMatch(key, /^token_id:\d+$/);
        assertMatch(lp.tokens[i], /^token_id:\d+$/);
        // Greedy: the chosen token is the most likely one, with its own logprob.
        assertEquals(top[lp.tokens[i]], lp.token_logprobs[i]);
        assertEquals(Math.max(...Object.values(top) as number[]), lp.token_logprobs[i]);
      }
      // The ids decode back to the text through /detokenize.
      const ids = lp.tokens.map((t: string) => Number(t.slice("token_id:".length)));
      const detok = await s.post("/detokenize", { tokens: ids });
      assertEquals((await detok.json()).prompt, byId.text);
    });
    await t.step("streamed completions: every chunk's steps have K keys", async () => {
      const res = await s.post("/v1/completions", {
        ...body,
        stream: true,
        return_tokens_as_token_ids: true,
      });
      const chunks = (await sseData(res)).slice(0, -1).map((d) => JSON.parse(d));
      let steps = 0;
      for (const c of chunks) {
        for (const top of c.choices[0].logprobs?.top_logprobs ?? []) {
          assertEquals(Object.keys(top).length, K);
          steps++;
        }
      }
      assertEquals(steps, 8);
    });
    await t.step("chat: token and top_logprobs tokens are token_id:N", async () => {
      const res = await s.post("/v1/chat/completions", {
        model: MODEL_ID,
        messages: [{ role: "user", content: "x" }],
        max_tokens: 4,
        temperature: 0,
        logprobs: true,
        top_logprobs: K,
        ignore_eos: true,
        return_tokens_as_token_ids: true,
      });
      const content = (await res.json()).choices[0].logprobs.content;
      assertEquals(content.length, 4);
      for (const c of content) {
        assertMatch(c.token, /^token_id:\d+$/);
        assertEquals(new Set(c.top_logprobs.map((e: { token: string }) => e.token)).size, K);
        for (const e of c.top_logprobs) assertMatch(e.token, /^token_id:\d+$/);
      }
    });
  } finally {
    await s.close();
  }
});

Deno.test("completions: empty stop strings and fields Sluice does not implement get a 400 naming them", async () => {
  const s = await startServer();
  try {
    const chat = { model: MODEL_ID, messages: [{ role: "user", content: "x" }], max_tokens: 2 };
    const text = { model: MODEL_ID, prompt: "x", max_tokens: 2 };
    const refused: [string, object, string][] = [
      ["/v1/completions", { ...text, stop: "" }, "stop"],
      ["/v1/completions", { ...text, stop: ["a", ""] }, "stop"],
      ["/v1/chat/completions", { ...chat, stop: "" }, "stop"],
      ["/v1/chat/completions", { ...chat, tool_choice: "required" }, "tool_choice"],
      ["/v1/chat/completions", {
        ...chat,
        tool_choice: { type: "function", function: { name: "f" } },
      }, "tool_choice"],
      ["/v1/chat/completions", { ...chat, functions: [{ name: "f" }] }, "functions"],
      ["/v1/chat/completions", { ...chat, function_call: { name: "f" } }, "function_call"],
      ["/v1/chat/completions", {
        ...chat,
        response_format: { type: "json_schema", json_schema: {} },
      }, "response_format.json_schema.name"],
      ["/v1/completions", { ...text, response_format: { type: "json_object" } }, "response_format"],
      ["/v1/chat/completions", { ...chat, top_logprobs: 3 }, "top_logprobs"],
    ];
    for (const [path, body, param] of refused) {
      const res = await s.post(path, body);
      const json = await res.json();
      assertEquals(res.status, 400, `${path} ${JSON.stringify(body)}`);
      assertEquals(json.error.param, param);
      assertEquals(json.error.type, "invalid_request_error");
      assert(json.error.message.includes(param), json.error.message);
    }
    // Their neutral values change nothing, so they are accepted.
    const accepted: [string, object][] = [
      ["/v1/chat/completions", {
        ...chat,
        tools: [],
        tool_choice: "none",
        functions: [],
        function_call: "auto",
        parallel_tool_calls: false,
        response_format: { type: "text" },
        logit_bias: {},
        min_p: 0,
        repetition_penalty: 1,
        stop: ["a"],
      }],
      ["/v1/chat/completions", { ...chat, tool_choice: "auto", logit_bias: null, tools: null }],
      ["/v1/completions", { ...text, response_format: { type: "text" }, stop: "a" }],
      // Implemented since (tests/server/routes/chat_*_test.ts): accepted.
      ["/v1/completions", { ...text, logit_bias: { "5": -100 }, min_p: 0.1 }],
      ["/v1/completions", { ...text, repetition_penalty: 1.2, presence_penalty: 0.5 }],
    ];
    for (const [path, body] of accepted) {
      const res = await s.post(path, body);
      assertEquals(res.status, 200, JSON.stringify(await res.json()));
    }
  } finally {
    await s.close();
  }
});
