// POST /v1/embeddings and POST /v1/rerank (also at /rerank, /v2/rerank, /reranking and
// /v1/reranking, where Jina's, Cohere's and llama.cpp's clients call it): the request's model's embedder or reranker, through the model
// router like every route. A model that cannot serve the request (a chat model with no pooling
// config, an embedding model asked to rerank) is a 400 naming what it is.

import { type Context, Hono } from "hono";
import type { ObservedEnv } from "../middleware/count_requests.ts";
import { parseBody } from "../openai/body.ts";
import { type ServerState, withEmbedder, withReranker } from "../state/server_state.ts";
import { EmbeddingsRequest, RerankRequest } from "./schema.ts";
import { base64Of, withDimensions } from "./vectors.ts";

/** Tokens one embeddings or rerank request may read, all inputs together. */
export const MAX_REQUEST_TOKENS = 65_536;

/** The input as a list of inputs (a string, strings, one token array, token arrays). */
export function inputsOf(input: EmbeddingsRequest["input"]): (string | number[])[] {
  if (typeof input === "string") return [input];
  if (input.length > 0 && typeof input[0] === "number") return [input as number[]];
  return input as (string | number[])[];
}

export function embeddingsRoutes(state: ServerState): Hono<ObservedEnv> {
  const app = new Hono<ObservedEnv>();
  app.post("/v1/embeddings", async (c) => {
    const body = await parseBody(c, EmbeddingsRequest);
    return await withEmbedder(state, body.model, async (embedder, model) => {
      const abort = new AbortController();
      c.req.raw.signal.addEventListener("abort", () => abort.abort(), { once: true });
      const out = await embedder.embed(inputsOf(body.input), {
        signal: abort.signal,
        maxTotalTokens: MAX_REQUEST_TOKENS,
      });
      const vectors = withDimensions(embedder, out.vectors, body.dimensions);
      const base64 = body.encoding_format === "base64";
      return c.json({
        object: "list",
        data: vectors.map((v, index) => ({
          object: "embedding",
          index,
          embedding: base64 ? base64Of(v) : Array.from(v),
        })),
        model,
        usage: { prompt_tokens: out.promptTokens, total_tokens: out.promptTokens },
      });
    });
  });
  const rerank = async (c: Context<ObservedEnv>) => {
    const body = await parseBody(c, RerankRequest);
    return await withReranker(state, body.model, async (reranker, model) => {
      const abort = new AbortController();
      c.req.raw.signal.addEventListener("abort", () => abort.abort(), { once: true });
      const texts = body.documents.map((d) => typeof d === "string" ? d : d.text);
      // Documents longer than the model reads are cut, as Cohere's and Jina's rerankers cut them.
      const out = await reranker.rerank(body.query, texts, {
        truncate: true,
        signal: abort.signal,
        maxTotalTokens: MAX_REQUEST_TOKENS,
      });
      const order = out.scores.map((score, index) => ({ index, score }))
        .sort((a, b) => b.score - a.score || a.index - b.index)
        .slice(0, body.top_n ?? texts.length);
      return c.json({
        id: `rerank-${crypto.randomUUID()}`,
        model,
        results: order.map(({ index, score }) => ({
          index,
          relevance_score: score,
          ...(body.return_documents ? { document: { text: texts[index] } } : {}),
        })),
        usage: { prompt_tokens: out.promptTokens, total_tokens: out.promptTokens },
      });
    });
  };
  // Jina's and Cohere's paths, and llama.cpp's /reranking spellings.
  for (const path of ["/v1/rerank", "/rerank", "/v2/rerank", "/reranking", "/v1/reranking"]) {
    app.post(path, rerank);
  }
  return app;
}
