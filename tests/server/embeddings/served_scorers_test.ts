// Models that serve vectors behind the router, as `serve` opens them (runtime/open.ts's
// openServedModel): a generated BERT embedding model and a BERT cross-encoder answer
// /v1/embeddings, /api/embed and /v1/rerank with what the encoder computes itself, and a Qwen3 with
// a sentence-transformers pooling config, in a Worker, what the same model gives in this process
// (each one's own tests hold it to a float64 reference); /v1/models says each one's kind once
// loaded, and each refuses what it cannot serve.

import { join } from "node:path";
import { writeTinyEncoder } from "../../../engine/sources/tiny_encoder.ts";
import { openEncoderModel } from "../../../runtime/embedding/open_encoder.ts";
import { openServedModel } from "../../../runtime/open.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { startServer } from "../harness.ts";
import { cosine } from "../../helpers/compare.ts";
import { writeTinyEmbeddingModel } from "../../helpers/tiny_embedding_model.ts";

const SHAPE = {
  numLayers: 2,
  hiddenSize: 32,
  numHeads: 4,
  intermediateSize: 64,
  seed: 5,
  dtype: "F16" as const,
};

Deno.test("served encoders: embeddings and relevance through the router, as the encoder gives them", async () => {
  const root = await Deno.makeTempDir({ prefix: "sluice-served-enc-" });
  const dirs = { bert: join(root, "bert"), ranker: join(root, "ranker") };
  await writeTinyEncoder(dirs.bert, { family: "bert", ...SHAPE });
  await writeTinyEncoder(dirs.ranker, { family: "bert", numLabels: 1, ...SHAPE });
  const opts = {
    engine: {},
    runtime: { policy: "fcfs" as const, maxQueue: 8, maxTokensLimit: 64 },
  };
  const s = await startServer({
    router: {
      ids: ["bert", "ranker"],
      open: (id) => openServedModel(dirs[id as keyof typeof dirs], opts, () => {}),
    },
  });
  const direct = await openEncoderModel(dirs.bert);
  const directRanker = await openEncoderModel(dirs.ranker);
  try {
    const texts = ["the sluice gate", "a lock on the canal", "naïve café"];
    const got = await s.client.embeddings.create({ model: "bert", input: texts });
    const want = (await direct.embedder!.embed(texts)).vectors;
    texts.forEach((t, i) => {
      const c = cosine(got.data[i].embedding, want[i]);
      assert(c >= 0.99999, `${t}: cosine ${c}`);
    });
    const ollama = await (await s.post("/api/embed", { model: "bert", input: texts[0] })).json();
    assert(cosine(ollama.embeddings[0], want[0]) >= 0.99999);

    const documents = ["bread", "a canal lock gate", "the lock keeper"];
    const ranked = await (await s.post("/v1/rerank", {
      model: "ranker",
      query: "canal lock",
      documents,
    })).json();
    const scores = (await directRanker.reranker!.rerank("canal lock", documents)).scores;
    const order = scores.map((x, i) => [x, i]).sort((a, b) => b[0] - a[0]).map(([, i]) => i);
    assertEquals(ranked.results.map((r: { index: number }) => r.index), order);
    ranked.results.forEach((r: { index: number; relevance_score: number }) =>
      assert(Math.abs(r.relevance_score - scores[r.index]) < 1e-6)
    );

    const models = (await (await fetch(`${s.url}/v1/models`)).json()).data;
    assertEquals(
      models.map((m: { id: string; kind?: string }) => [m.id, m.kind]),
      [["bert", "embedding"], ["ranker", "reranker"]],
    );
    const chat = await s.post("/v1/chat/completions", {
      model: "bert",
      messages: [{ role: "user", content: "hi" }],
    });
    assertEquals(chat.status, 400);
    const wrong = await s.post("/v1/rerank", { model: "bert", query: "q", documents: ["d"] });
    assertEquals(wrong.status, 400);
    assert((await wrong.json()).error.message.includes("an embedding model"));
  } finally {
    await direct.embedder!.close();
    await directRanker.reranker!.close();
    await s.close();
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("served decoder embeddings: a Qwen3 with a pooling config is an embedding model, in a Worker as serve opens it", async () => {
  const root = await Deno.makeTempDir({ prefix: "sluice-served-dec-" });
  const dir = join(root, "qwen3-embedding");
  await writeTinyEmbeddingModel(dir);
  const opts = {
    engine: { gpuKvMb: 4, maxSlots: 4, maxRows: 32, skipWarmUp: true },
    runtime: { policy: "fcfs" as const, maxQueue: 16, maxTokensLimit: 64 },
  };
  const s = await startServer({
    router: { ids: ["qe"], open: () => openServedModel(dir, opts, () => {}) },
  });
  // The same model in this process, its embedder called directly.
  const local = await openServedModel(dir, { ...opts, inProcess: true }, () => {});
  try {
    const texts = ["the sluice gate", "a much longer sentence about a lock on the canal", "x"];
    const got = await s.client.embeddings.create({ model: "qe", input: texts });
    const want = (await local.embedder!.embed(texts)).vectors;
    texts.forEach((t, i) => {
      const c = cosine(got.data[i].embedding, want[i]);
      assert(c >= 0.99999, `${t}: cosine ${c}`);
    });
    assertEquals(got.data[0].embedding.length, 64);
    const chat = await s.post("/v1/chat/completions", {
      model: "qe",
      messages: [{ role: "user", content: "hi" }],
    });
    assertEquals(chat.status, 400);
    assert((await chat.json()).error.message.includes("an embedding model"));
  } finally {
    await local.close();
    await s.close();
    await Deno.remove(root, { recursive: true });
  }
});
