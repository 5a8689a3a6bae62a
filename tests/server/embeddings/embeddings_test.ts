// Embeddings and reranking over HTTP, with fake scoring models (tests/helpers/fake_embedder.ts, no
// GPU): the official clients unchanged (openai's embeddings in float and in its default base64, the
// AI SDK's embedMany, LangChain's OpenAIEmbeddings, ollama's embed and embeddings), the input forms,
// dimensions, the limits, rerank's order and top_n, and the 400s that name a model's kind.

import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { OpenAIEmbeddings } from "@langchain/openai";
import { embedMany } from "ai";
import { Ollama } from "ollama";
import {
  fakeEmbedder,
  fakeReranker,
  fakeTokens,
  fakeVector,
  scoringModel,
} from "../../helpers/fake_embedder.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { MODEL_ID, startServer, type TestServer } from "../harness.ts";

const EMBED = "embedder";
const MRL = "mrl-embedder";
const RERANK = "reranker";

const close = (a: ArrayLike<number>, b: ArrayLike<number>) =>
  a.length === b.length && Array.from(a).every((x, i) => Math.abs(x - b[i]) < 1e-6);

const expected = (text: string, dims = 8) => fakeVector(fakeTokens(text), dims);

async function withServer(fn: (s: TestServer) => Promise<void>) {
  const s = await startServer({
    scorers: {
      [EMBED]: scoringModel({ embedder: fakeEmbedder() }),
      [MRL]: scoringModel({ embedder: fakeEmbedder({ dimensions: 16, matryoshka: true }) }),
      [RERANK]: scoringModel({ reranker: fakeReranker() }),
    },
  });
  try {
    await fn(s);
  } finally {
    await s.close();
  }
}

Deno.test("embeddings: the official clients, unchanged", async (t) => {
  await withServer(async (s) => {
    const texts = ["the sluice gate", "a lock on the canal", "water"];
    await t.step("openai: float and its default base64", async () => {
      const float = await s.client.embeddings.create({
        model: EMBED,
        input: texts,
        encoding_format: "float",
      });
      assertEquals(float.data.map((d) => d.index), [0, 1, 2]);
      texts.forEach((text, i) => assert(close(float.data[i].embedding, expected(text)), text));
      assertEquals(float.usage.prompt_tokens, texts.join("").length);
      assertEquals(float.model, EMBED);
      // No encoding_format: the client asks for base64 and decodes it.
      const b64 = await s.client.embeddings.create({ model: EMBED, input: texts[0] });
      assert(close(b64.data[0].embedding, expected(texts[0])));
    });
    await t.step("AI SDK embedMany", async () => {
      const provider = createOpenAICompatible({
        name: "sluice",
        baseURL: `${s.url}/v1`,
        apiKey: "none",
      });
      const { embeddings } = await embedMany({
        model: provider.embeddingModel(EMBED),
        values: texts,
      });
      texts.forEach((text, i) => assert(close(embeddings[i], expected(text)), text));
    });
    await t.step("LangChain OpenAIEmbeddings", async () => {
      const lc = new OpenAIEmbeddings({
        model: EMBED,
        apiKey: "none",
        configuration: { baseURL: `${s.url}/v1` },
        maxRetries: 0,
      });
      const [one, ...many] = [await lc.embedQuery(texts[0]), ...await lc.embedDocuments(texts)];
      assert(close(one, expected(texts[0])));
      texts.forEach((text, i) => assert(close(many[i], expected(text)), text));
    });
    await t.step("ollama embed and embeddings", async () => {
      const ollama = new Ollama({ host: s.url });
      const out = await ollama.embed({ model: EMBED, input: texts });
      assertEquals(out.model, `${EMBED}:latest`);
      texts.forEach((text, i) => assert(close(out.embeddings[i], expected(text)), text));
      assertEquals(out.prompt_eval_count, texts.join("").length);
      const cut = await ollama.embed({ model: MRL, input: "water", dimensions: 4 });
      assertEquals(cut.embeddings[0].length, 4);
      const shown = await ollama.show({ model: EMBED });
      assertEquals(shown.capabilities, ["embedding"]);
      const old = await ollama.embeddings({ model: EMBED, prompt: "water" });
      assert(close(old.embedding, expected("water")));
      // Ollama truncates by default; truncate: false refuses an input over the model's 64 tokens.
      const long = "x".repeat(100);
      const truncated = await ollama.embed({ model: EMBED, input: long });
      assert(close(truncated.embeddings[0], expected("x".repeat(64))));
      const refused = await s.post("/api/embed", { model: EMBED, input: long, truncate: false });
      assertEquals(refused.status, 400);
      assert(typeof (await refused.json()).error === "string");
    });
  });
});

Deno.test("embeddings: input forms, dimensions, limits and the model's kind", async () => {
  await withServer(async (s) => {
    const embed = async (body: Record<string, unknown>) => {
      const r = await s.post("/v1/embeddings", body);
      return [r.status, await r.json()] as const;
    };
    // Token ids are taken as they are: one array, or one per input.
    const ids = fakeTokens("canal");
    let [status, out] = await embed({ model: EMBED, input: ids });
    assertEquals(status, 200);
    assert(close(out.data[0].embedding, expected("canal")));
    [status, out] = await embed({ model: EMBED, input: [ids, fakeTokens("lock")] });
    assertEquals(out.data.length, 2);
    assert(close(out.data[1].embedding, expected("lock")));
    // dimensions: a Matryoshka model's prefix, renormalised; any other model only its own size.
    [status, out] = await embed({ model: MRL, input: "canal", dimensions: 5 });
    const full = expected("canal", 16).subarray(0, 5);
    const norm = Math.hypot(...full);
    assert(close(out.data[0].embedding, Array.from(full).map((x) => x / norm)));
    [status, out] = await embed({ model: EMBED, input: "canal", dimensions: 8 });
    assertEquals(status, 200);
    [status, out] = await embed({ model: EMBED, input: "canal", dimensions: 4 });
    assertEquals([status, out.error.param], [400, "dimensions"]);
    // Limits: an empty input, an id outside the vocabulary, an input over the model's length (the
    // OpenAI API does not truncate), more than 2048 inputs.
    for (
      const [input, code] of [
        ["", "empty_input"],
        [[999], "invalid_value"],
        ["y".repeat(65), "input_too_long"],
      ] as const
    ) {
      [status, out] = await embed({ model: EMBED, input });
      assertEquals([status, out.error.code], [400, code], JSON.stringify(input));
    }
    [status, out] = await embed({ model: EMBED, input: Array(2049).fill("a") });
    assertEquals([status, out.error.param], [400, "input"]);
    [status, out] = await embed({ model: EMBED, input: "a", encoding_format: "hex" });
    assertEquals([status, out.error.param], [400, "encoding_format"]);
    // What a model is decides what it serves, and the error says which.
    [status, out] = await embed({ model: MODEL_ID, input: "a" });
    assertEquals(status, 400);
    assert(out.error.message.includes("chat model with no pooling config"), out.error.message);
    const chat = await s.post("/v1/chat/completions", {
      model: EMBED,
      messages: [{ role: "user", content: "hi" }],
    });
    assertEquals(chat.status, 400);
    assert((await chat.json()).error.message.includes("an embedding model"));
    const gen = await s.post("/api/generate", { model: EMBED, prompt: "hi", stream: false });
    assertEquals(gen.status, 400);
    assert((await gen.json()).error.includes("an embedding model"));
    [status, out] = await embed({ model: "nope", input: "a" });
    assertEquals([status, out.error.code], [404, "model_not_found"]);
  });
});

Deno.test("rerank: scores in order, top_n, documents returned, at every path clients call", async () => {
  await withServer(async (s) => {
    const documents = ["a lock raises boats", "bread and butter", "the canal lock gate"];
    for (const path of ["/v1/rerank", "/rerank", "/v2/rerank", "/reranking", "/v1/reranking"]) {
      const r = await s.post(path, {
        model: RERANK,
        query: "canal lock",
        documents,
        top_n: 2,
        return_documents: true,
      });
      const out = await r.json();
      assertEquals(r.status, 200, JSON.stringify(out));
      assertEquals(out.results.map((x: { index: number }) => x.index), [2, 0], path);
      assertEquals(out.results[0].relevance_score, 1);
      assertEquals(out.results[1].relevance_score, 0.5);
      assertEquals(out.results[0].document, { text: documents[2] });
    }
    const plain = await (await s.post("/v1/rerank", {
      model: RERANK,
      query: "bread",
      documents: documents.map((text) => ({ text })),
    })).json();
    assertEquals(plain.results.length, 3);
    assertEquals(plain.results[0], { index: 1, relevance_score: 1 });
    for (
      const body of [
        { model: RERANK, query: "", documents },
        { model: RERANK, query: "q", documents: [] },
        { model: EMBED, query: "q", documents },
      ]
    ) {
      const r = await s.post("/v1/rerank", body);
      assertEquals(r.status, 400, JSON.stringify(body));
      await r.body?.cancel();
    }
  });
});
