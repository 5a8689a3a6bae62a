// The `ollama` client (npm), unchanged, against Sluice's /api routes over the fake engine, one
// server for the file: version, list, ps, show; chat and generate, streamed and not, with their
// last object's counts and durations; `format` with a JSON schema (the answer parses and
// matches); a tool call with its arguments as an object, and its result sent back; and the errors
// in Ollama's shape (unknown model 404, bad options 400, images 400, pull 501).

import { Ollama } from "ollama";
import { z } from "zod";
import { assert, assertEquals, assertMatch } from "../../helpers/testing.ts";
import { MODEL_ID, startServer } from "../harness.ts";
import { createApp } from "../../../server/app.ts";
import { ServerMetrics } from "../../../server/metrics/server_metrics.ts";
import { startingState } from "../../helpers/model_router.ts";
import { MAX_TOKENS, Person, SEEDS, WeatherArgs, weatherParameters } from "../clients/schemas.ts";

const NAME = `${MODEL_ID}:latest`;

/** The last object's counts and durations, as Ollama gives them. */
function assertStats(last: Record<string, unknown>, doneReasons = ["stop", "length"]) {
  assertEquals(last.done, true);
  assert(doneReasons.includes(last.done_reason as string), String(last.done_reason));
  for (const key of ["prompt_eval_count", "eval_count"]) {
    assert(Number.isInteger(last[key]) && (last[key] as number) > 0, `${key}: ${last[key]}`);
  }
  for (const key of ["total_duration", "prompt_eval_duration", "eval_duration"]) {
    assert(Number.isInteger(last[key]) && (last[key] as number) >= 0, `${key}: ${last[key]}`);
  }
  assertEquals(last.load_duration, 0);
  assert((last.total_duration as number) >= (last.eval_duration as number));
}

/** The rejection's status and message, as the client reports them. */
async function refusal(call: () => Promise<unknown>): Promise<{ status: number; error: string }> {
  try {
    await call();
  } catch (err) {
    const { status_code: status, error } = err as { status_code: number; error: string };
    return { status, error };
  }
  throw new Error("the call was not refused");
}

Deno.test("ollama client: the /api routes", async (t) => {
  const s = await startServer({ runtime: { maxTokensLimit: 1024 } });
  const ollama = new Ollama({ host: s.url });
  try {
    await t.step("version, list, ps, show", async () => {
      assertMatch((await ollama.version()).version, /^\d+\.\d+\.\d+$/);
      const { models } = await ollama.list();
      assertEquals(models.map((m) => m.name), [NAME]);
      assertEquals(models[0].details.family, s.runtime.info.architecture);
      assertEquals(models[0].size, s.runtime.info.weightBytes);
      const ps = (await ollama.ps()).models;
      assertEquals(ps.map((m) => m.model), [NAME]);
      assertEquals(
        (ps[0] as unknown as { context_length: number }).context_length,
        s.runtime.info.maxContext,
      );
      const shown = await ollama.show({ model: MODEL_ID });
      assert(shown.capabilities.includes("completion"));
      assert(shown.template.length > 0, "the model's chat template");
      const info = shown.model_info as unknown as Record<string, unknown>;
      assertEquals(
        info[`${s.runtime.info.architecture}.context_length`],
        s.runtime.info.maxContext,
      );
    });

    await t.step("chat, whole and streamed: the same greedy answer", async () => {
      const request = {
        model: NAME,
        messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello" }],
        options: { temperature: 0, num_predict: 6 },
        keep_alive: "5m",
      };
      const whole = await ollama.chat({ ...request, stream: false });
      assertEquals(whole.model, NAME);
      assertEquals(whole.message.role, "assistant");
      assertStats(whole as unknown as Record<string, unknown>);
      assert(whole.eval_count <= 6);
      let text = "";
      let last: Record<string, unknown> = {};
      for await (const part of await ollama.chat({ ...request, stream: true })) {
        if (!part.done) assertEquals(part.message.role, "assistant");
        text += part.message.content;
        last = part as unknown as Record<string, unknown>;
      }
      assertStats(last);
      assertEquals(text, whole.message.content, "greedy: streamed pieces add up to the whole");
      assertEquals(last.eval_count, whole.eval_count);
    });

    await t.step("generate, whole and streamed, and its context", async () => {
      const request = {
        model: MODEL_ID,
        prompt: "Once upon",
        options: { temperature: 0, num_predict: 5 },
      };
      const whole = await ollama.generate({ ...request, stream: false });
      assertStats(whole as unknown as Record<string, unknown>);
      assertEquals(whole.context.length, whole.prompt_eval_count + whole.eval_count);
      let text = "";
      let context: number[] = [];
      for await (const part of await ollama.generate({ ...request, stream: true })) {
        text += part.response;
        if (part.done) context = part.context;
      }
      assertEquals(text, whole.response);
      assertEquals(context, whole.context);
      // raw: the prompt as it is, after an earlier answer's context.
      const next = await ollama.generate({
        model: MODEL_ID,
        prompt: " more",
        raw: true,
        context: whole.context,
        options: { num_predict: 3 },
      });
      assert(next.prompt_eval_count > whole.context.length);
    });

    await t.step("format: a JSON schema holds the answer, chat and generate", async () => {
      const format = z.toJSONSchema(Person);
      for (const seed of SEEDS.slice(0, 3)) {
        const chat = await ollama.chat({
          model: NAME,
          messages: [{ role: "user", content: "Describe a person." }],
          format,
          options: { temperature: 1, seed, num_predict: MAX_TOKENS },
        });
        assertEquals(chat.done_reason, "stop");
        assert(Person.safeParse(JSON.parse(chat.message.content)).success, chat.message.content);
      }
      const generated = await ollama.generate({
        model: NAME,
        prompt: "Describe a person.",
        format,
        options: { seed: 7, num_predict: MAX_TOKENS },
      });
      assert(Person.safeParse(JSON.parse(generated.response ?? "")).success, generated.response);
      const json = await ollama.generate({
        model: NAME,
        prompt: "Any JSON.",
        format: "json",
        options: { seed: 3, num_predict: MAX_TOKENS },
      });
      const value = JSON.parse(json.response ?? "");
      assert(typeof value === "object" && value !== null && !Array.isArray(value));
    });

    await t.step("tools: a call comes back with its arguments as an object", async () => {
      const tools = [{
        type: "function",
        function: {
          name: "get_weather",
          description: "The weather in a city",
          parameters: weatherParameters as Record<string, unknown>,
        },
      }];
      const question = { role: "user", content: "Weather in Paris?" };
      // Ollama has no tool_choice; Sluice's extension forces the call the random model would not make.
      const forced = { tool_choice: "required" } as Record<string, unknown>;
      const reply = await ollama.chat({
        model: NAME,
        messages: [question],
        tools,
        options: { seed: 1, num_predict: MAX_TOKENS },
        ...forced,
      });
      const calls = reply.message.tool_calls ?? [];
      assert(calls.length >= 1, JSON.stringify(reply.message));
      assertEquals(calls[0].function.name, "get_weather");
      assert(WeatherArgs.safeParse(calls[0].function.arguments).success);
      // Streamed: the call arrives whole, in one piece.
      const streamed = [];
      for await (
        const part of await ollama.chat({
          model: NAME,
          messages: [question],
          tools,
          stream: true,
          options: { seed: 2, num_predict: MAX_TOKENS },
          ...forced,
        })
      ) streamed.push(...part.message.tool_calls ?? []);
      assert(streamed.length >= 1 && WeatherArgs.safeParse(streamed[0].function.arguments).success);
      // The result goes back as a tool message, named by the tool.
      const answer = await ollama.chat({
        model: NAME,
        messages: [
          question,
          reply.message,
          { role: "tool", content: "21 degrees", tool_name: "get_weather" },
        ],
        tools,
        options: { temperature: 0, num_predict: 4 },
      });
      assertEquals(answer.done, true);
    });

    await t.step("think splits reasoning off; false leaves it in the answer", async () => {
      // A prompt that opens <think>: what follows is reasoning until the model closes it.
      const request = { model: NAME, prompt: "Q: why?\n<think>", raw: true };
      const options = { temperature: 0, num_predict: 5 };
      const split = await ollama.generate({ ...request, think: true, options });
      assert((split.thinking ?? "").length > 0 && split.response === "", JSON.stringify(split));
      const inline = await ollama.generate({ ...request, think: false, options });
      assertEquals(inline.thinking, undefined);
      // (the split drops the whitespace that only separates the tag from the reasoning)
      assertEquals(inline.response?.trimStart(), split.thinking, "greedy: the same text, inline");
      const levels = await refusal(() => ollama.generate({ ...request, think: "high", options }));
      assertEquals(levels.status, 400);
    });

    await t.step("NDJSON by default, num_ctx caps the answer, an empty request loads", async () => {
      const res = await s.post("/api/chat", {
        model: NAME,
        messages: [{ role: "user", content: "Hello" }],
        options: { temperature: 0, num_predict: 3 },
      });
      assertEquals(res.headers.get("content-type"), "application/x-ndjson");
      assertMatch(res.headers.get("sluice-request-id") ?? "", /^chatcmpl-/);
      const lines = (await res.text()).split("\n");
      assertEquals(lines.pop(), "", "every object ends with a newline");
      const objects = lines.map((l) => JSON.parse(l));
      assertEquals(objects.at(-1).done, true);
      assert(objects.slice(0, -1).every((o) => o.done === false));

      const prompt =
        (await ollama.generate({ model: NAME, prompt: "Hello", options: { num_predict: 1 } }))
          .prompt_eval_count;
      const capped = await ollama.generate({
        model: NAME,
        prompt: "Hello",
        options: { num_ctx: prompt + 3, num_predict: 50 },
      });
      assertEquals(capped.done_reason, "length");
      assertEquals(capped.eval_count, 3);
      const full = await refusal(() =>
        ollama.generate({ model: NAME, prompt: "Hello", options: { num_ctx: prompt } })
      );
      assertEquals(full.status, 400);

      const loaded = await ollama.generate({ model: NAME, prompt: "" });
      assertEquals([loaded.done, loaded.done_reason], [true, "load"]);
      const chatLoaded = await ollama.chat({ model: NAME, messages: [] });
      assertEquals(chatLoaded.done_reason, "load");
    });

    await t.step(
      "503 while the model loads; 405 and 413 in Ollama's shape; any media type read as JSON",
      async () => {
        const ready = s.state.model;
        s.state.model = { status: "loading" };
        try {
          const loading = await refusal(() => ollama.generate({ model: NAME, prompt: "hi" }));
          assertEquals(loading.status, 503);
          // A server still loading its model lists it in /api/tags, and nothing in /api/ps.
          const starting = createApp(
            startingState(MODEL_ID),
            { maxBodyBytes: 1024 },
            new ServerMetrics(),
          );
          const ps = await starting.request("/api/ps", { headers: { host: "127.0.0.1" } });
          assertEquals((await ps.json()).models, [], "nothing is loaded yet");
          const tags = await starting.request("/api/tags", { headers: { host: "127.0.0.1" } });
          assertEquals((await tags.json()).models.map((m: { name: string }) => m.name), [NAME]);
        } finally {
          s.state.model = ready;
        }
        const wrong = await fetch(`${s.url}/api/chat`);
        assertEquals(wrong.status, 405);
        assert(typeof (await wrong.json()).error === "string");
        // As Ollama, a body is JSON whatever its media type (`curl -d` sends form encoding).
        const form = await s.post(
          "/api/generate",
          JSON.stringify({ model: NAME, prompt: "hi", stream: false }),
          {
            headers: { "content-type": "application/x-www-form-urlencoded" },
          },
        );
        assertEquals(form.status, 200);
        assertEquals((await form.json()).done, true);
        const notJson = await s.post("/api/generate", "model=x", {
          headers: { "content-type": "application/x-www-form-urlencoded" },
        });
        assertEquals(notJson.status, 400);
        assert(typeof (await notJson.json()).error === "string");
        // The middleware's refusals too: a body too large.
        const large = await s.post("/api/generate", { model: NAME, prompt: "x".repeat(100_000) });
        assertEquals(large.status, 413);
        assert(typeof (await large.json()).error === "string");
      },
    );

    await t.step("errors in Ollama's shape", async () => {
      const unknown = await refusal(() =>
        ollama.chat({ model: "llama3", messages: [{ role: "user", content: "hi" }] })
      );
      assertEquals(unknown, { status: 404, error: 'model "llama3" not found' });
      assertEquals((await refusal(() => ollama.show({ model: "nope" }))).status, 404);

      const mirostat = await refusal(() =>
        ollama.generate({ model: NAME, prompt: "hi", options: { mirostat: 2 } })
      );
      assertEquals(mirostat.status, 400);
      assertMatch(mirostat.error, /mirostat/);
      const typo = await refusal(() =>
        ollama.generate({ model: NAME, prompt: "hi", options: { tempurature: 1 } as object })
      );
      assertEquals(typo.status, 400);
      assertMatch(typo.error, /tempurature/);
      const past = await refusal(() =>
        ollama.generate({ model: NAME, prompt: "hi", options: { num_ctx: 1 << 30 } })
      );
      assertEquals(past.status, 400);
      assertMatch(past.error, /num_ctx/);
      const keep = await refusal(() =>
        ollama.generate({ model: NAME, prompt: "hi", keep_alive: "5 minutes" })
      );
      assertEquals(keep.status, 400);

      const images = await refusal(() =>
        ollama.chat({
          model: NAME,
          messages: [{ role: "user", content: "What is this?", images: ["aGVsbG8="] }],
        })
      );
      assertEquals(images.status, 400);
      assertMatch(images.error, /no vision/);

      const pull = await refusal(() => ollama.pull({ model: "llama3" }));
      assertEquals(pull.status, 501);
      assertEquals((await refusal(() => ollama.delete({ model: NAME }))).status, 501);
      const route = await fetch(`${s.url}/api/nothing-here`);
      assertEquals(route.status, 404);
      assert(
        typeof (await route.json()).error === "string",
        "an unknown /api route: Ollama's shape",
      );
      const raw = await s.post("/api/create", { model: "x" });
      assertEquals(raw.status, 501);
      assert(typeof (await raw.json()).error === "string");
    });
  } finally {
    await s.close();
  }
});
