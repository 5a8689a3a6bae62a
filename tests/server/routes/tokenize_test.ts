// POST /tokenize and /detokenize in vLLM's shapes: a prompt's ids as /v1/completions runs them, a
// chat's as /v1/chat/completions does (the counts match the endpoints' usage), ids back to text,
// and the API's error rules (model, body shape, vocabulary, loading).

import { sampleValue } from "../../../server/metrics/parse.ts";
import { assert, assertEquals, assertMatch } from "../../helpers/testing.ts";
import { MODEL_ID, startServer } from "../harness.ts";

Deno.test("tokenize: a prompt's and a chat's ids, counted as the endpoints count them", async (t) => {
  const s = await startServer();
  try {
    const json = async (path: string, body: unknown, status = 200) => {
      const res = await s.post(path, body);
      const out = await res.json();
      assertEquals(res.status, status, JSON.stringify(out));
      return out;
    };
    const tokenizer = s.model.tokenizer;
    assert(tokenizer);
    const maxModelLen = s.runtime.info.maxContext;

    await t.step("a prompt: {tokens, count, max_model_len}", async () => {
      const out = await json("/tokenize", { model: MODEL_ID, prompt: "hello there" });
      assertEquals(Object.keys(out).sort(), ["count", "max_model_len", "tokens"]);
      assertEquals(out.tokens, tokenizer.encode("hello there"));
      assertEquals(out.count, out.tokens.length);
      assertEquals(out.max_model_len, maxModelLen);
      // model is optional, as in vLLM; "default" names the served model.
      assertEquals((await json("/tokenize", { prompt: "hello there" })).tokens, out.tokens);
      assertEquals((await json("/tokenize", { model: "default", prompt: "hi" })).count > 0, true);
      const plain = await json("/tokenize", { prompt: "hello there", add_special_tokens: false });
      assertEquals(plain.tokens, tokenizer.encode("hello there", { addSpecialTokens: false }));
    });

    await t.step("the count is the prompt_tokens the endpoints report", async () => {
      const messages = [
        { role: "system", content: "be brief" },
        { role: "user", content: [{ type: "text", text: "what is a sluice?" }] },
      ];
      const chat = await json("/v1/chat/completions", { model: MODEL_ID, messages, max_tokens: 1 });
      const counted = await json("/tokenize", { messages });
      assertEquals(counted.count, chat.usage.prompt_tokens);
      const bare = await json("/tokenize", { messages, add_generation_prompt: false });
      assert(bare.count < counted.count, "the generation prompt adds tokens");
      assertEquals(counted.tokens.slice(0, bare.count), bare.tokens);

      const text = await json("/v1/completions", {
        model: MODEL_ID,
        prompt: "a b c",
        max_tokens: 1,
      });
      assertEquals((await json("/tokenize", { prompt: "a b c" })).count, text.usage.prompt_tokens);
    });

    await t.step("detokenize: ids back to text", async () => {
      const { tokens } = await json("/tokenize", {
        prompt: "Sluice gates",
        add_special_tokens: false,
      });
      const out = await json("/detokenize", { model: MODEL_ID, tokens });
      assertEquals(out, { prompt: "Sluice gates" });
      assertEquals(await json("/detokenize", { tokens: [] }), { prompt: "" });
    });

    await t.step("errors: the API's envelope and rules", async () => {
      const cases: [string, unknown, number, string | null, RegExp][] = [
        ["/tokenize", { model: "gpt-9", prompt: "x" }, 404, "model", /does not exist/],
        ["/tokenize", {}, 400, "prompt", /exactly one of 'prompt' and 'messages'/],
        [
          "/tokenize",
          { prompt: "x", messages: [{ role: "user", content: "x" }] },
          400,
          "prompt",
          /exactly one/,
        ],
        ["/tokenize", { prompt: 5 }, 400, "prompt", /prompt/],
        [
          "/tokenize",
          { prompt: "x", return_token_strs: true },
          400,
          "return_token_strs",
          /not supported/,
        ],
        [
          "/tokenize",
          { messages: [{ role: "user", content: "x" }], add_special_tokens: true },
          400,
          "add_special_tokens",
          /chat template/,
        ],
        ["/detokenize", { tokens: [1, 99999] }, 400, "tokens", /outside the vocabulary/],
        ["/detokenize", { tokens: [-1] }, 400, "tokens.0", /tokens/],
        ["/detokenize", { prompt: "x" }, 400, "tokens", /tokens/],
        ["/detokenize", { model: "gpt-9", tokens: [1] }, 404, "model", /does not exist/],
      ];
      for (const [path, body, status, param, message] of cases) {
        const out = await json(path, body, status);
        assertEquals(out.error.param, param, JSON.stringify(body));
        assertMatch(out.error.message, message);
        assertEquals(typeof out.error.type, "string");
      }
      const ready = s.state.model;
      s.state.model = { status: "loading" };
      try {
        const out = await json("/tokenize", { prompt: "x" }, 503);
        assertEquals(out.error.code, "model_loading");
      } finally {
        s.state.model = ready;
      }
    });

    const m = await s.scrape();
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "400" }), 8);
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "404" }), 2);
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "503" }), 1);
  } finally {
    await s.close();
  }
});
