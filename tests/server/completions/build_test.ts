// The one request builder: what each endpoint's body becomes for the runtime (no GPU: a tokenizer
// and the builder only), and how the completions writer shapes its chunks.

import { openModelDir } from "../../../engine/formats/open_model.ts";
import { PromptEncoder } from "../../../engine/text/prompt_encoder.ts";
import { Tokenizer } from "../../../engine/text/tokenizer.ts";
import { writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import { buildRequest, submitParams } from "../../../server/completions/build.ts";
import { chat, completion } from "../../../server/completions/kinds.ts";
import { ChatRequest, CompletionRequest } from "../../../server/openai/schemas.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { TINY_SPEC } from "../harness.ts";

type Text = { tokenizer: Tokenizer; prompts: PromptEncoder };

async function withTokenizer(fn: (text: Text) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "sluice-build-" });
  try {
    await writeTinyModel(dir, TINY_SPEC);
    const files = await openModelDir(dir);
    const tokenizer = new Tokenizer(files);
    const prompts = new PromptEncoder(tokenizer, files);
    try {
      await fn({ tokenizer, prompts });
    } finally {
      prompts.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("build: both endpoints' bodies become the same kind of SubmitParams", async () => {
  await withTokenizer(async (text) => {
    const tok = text.tokenizer;
    const shared = {
      model: "m",
      temperature: 0.5,
      top_k: 7,
      top_p: 0.9,
      seed: 42,
      reading_rate: 12,
      slo_ttft_ms: 300,
      ignore_eos: true,
      stop: "\n",
    };
    // Chat runs through agent/chat_run.ts, which renders the prompt and reads its params here.
    const c = submitParams(
      chat,
      ChatRequest.parse({
        ...shared,
        messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
        max_completion_tokens: 9,
        max_tokens: 99, // max_completion_tokens wins
        logprobs: true,
        top_logprobs: 3,
        stream: true,
      }),
      [1, 2, 3],
    );
    assertEquals(c.ids, [1, 2, 3]);
    assertEquals(c.maxTokens, 9);
    assertEquals(c.maxTokensDefault, undefined);
    assertEquals(c.topLogprobs, 3);
    assertEquals(c.sampling, { temperature: 0.5, topK: 7, topP: 0.9, seed: 42 });
    assertEquals(c.stopIds, []);
    assertEquals(c.readingRate, 12);
    assertEquals(c.slo, { ttftMs: 300 }, "an SLO not given stays absent");

    const p = await buildRequest(
      completion,
      CompletionRequest.parse({ ...shared, prompt: [[5, 6, 7]] }),
      text,
      "m",
    );
    assertEquals(p.params.ids, [5, 6, 7]);
    assertEquals(p.params.maxTokens, undefined);
    assertEquals(p.params.maxTokensDefault, 16);
    assertEquals(p.params.topLogprobs, 0);
    assertEquals([p.stream, p.includeUsage], [false, false]);
    const plain = await buildRequest(
      completion,
      CompletionRequest.parse({ model: "m", prompt: "ab" }),
      text,
      "m",
    );
    assertEquals(plain.params.ids, tok.encode("ab"));
    assertEquals(plain.params.stopIds, undefined, "the model's EOS ids");
    assertEquals(plain.params.sampling.temperature, 1);
    assert(Number.isInteger(plain.params.sampling.seed) && plain.params.sampling.seed >= 0);
  });
});

Deno.test("build: the completions writer shapes its chunks and whole responses", async () => {
  await withTokenizer(async (text) => {
    const ev = (id: number) => ({
      id,
      logprob: -0.5,
      top: [[id, -0.5]] as [number, number][],
      generatedAt: 0,
    });
    const p = (await buildRequest(
      completion,
      CompletionRequest.parse({ model: "m", prompt: [1, 2], logprobs: 1 }),
      text,
      "m",
    )).writer;
    assertEquals(p.opening(), []);
    p.piece({ text: "ab", tokens: [ev(97), ev(98)] });
    const second = p.piece({ text: "c", tokens: [ev(99)] }) as {
      choices: { text: string; token_ids: number[]; logprobs: { text_offset: number[] } }[];
    };
    assertEquals(second.choices[0].text, "c");
    assertEquals(second.choices[0].token_ids, [99]);
    assertEquals(second.choices[0].logprobs.text_offset, [2], "offsets run on across chunks");
    const whole = p.whole({ text: "abc", tokens: [ev(97), ev(98), ev(99)] }, "stop", 3) as {
      object: string;
      usage: unknown;
      choices: { finish_reason: string }[];
    };
    assertEquals(whole.object, "text_completion");
    assertEquals(whole.choices[0].finish_reason, "stop");
    assertEquals(whole.usage, { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 });
  });
});

Deno.test("build: a reply that is not streamed is unpaced, whatever reading_rate says", async () => {
  // Nobody reads a whole reply token by token: pacing it only delays it (issue 17: a
  // non-streaming request at reading_rate 0.1 with 2 tokens took 41 s).
  await withTokenizer(async (text) => {
    const body = (stream: boolean) => ({
      model: "m",
      prompt: [5, 6],
      max_tokens: 2,
      reading_rate: 0.1,
      stream,
    });
    const whole = await buildRequest(completion, CompletionRequest.parse(body(false)), text, "m");
    assertEquals(whole.params.readingRate, 0, "0: unpaced, over the server's default rate too");
    const streamed = await buildRequest(
      completion,
      CompletionRequest.parse(body(true)),
      text,
      "m",
    );
    assertEquals(streamed.params.readingRate, 0.1);
    const chatWhole = submitParams(
      chat,
      ChatRequest.parse({
        model: "m",
        messages: [{ role: "user", content: "hi" }],
        reading_rate: 3,
      }),
      [1],
    );
    assertEquals(chatWhole.readingRate, 0);
  });
});
