// The bodies of POST /v1/embeddings (OpenAI's) and POST /v1/rerank (Jina's and Cohere's shape, which
// llama.cpp and vLLM serve too), checked with zod. Ollama's /api/embed is server/ollama/schema.ts's.

import { z } from "zod";

/** Inputs one request may carry (OpenAI's own limit). */
export const MAX_INPUTS = 2048;

const tokenIds = z.array(z.number().int().min(0)).min(1, "a token array must not be empty");

export const EmbeddingsRequest = z.object({
  model: z.string().min(1).nullish(),
  input: z.union([
    z.string(),
    z.array(z.string()).min(1).max(MAX_INPUTS),
    tokenIds,
    z.array(tokenIds).min(1).max(MAX_INPUTS),
  ]),
  encoding_format: z.enum(["float", "base64"]).default("float"),
  dimensions: z.number().int().min(1).nullish(),
  user: z.string().nullish(),
});
export type EmbeddingsRequest = z.infer<typeof EmbeddingsRequest>;

export const RerankRequest = z.object({
  model: z.string().min(1).nullish(),
  query: z.string().min(1, "the query must not be empty"),
  documents: z.array(z.union([z.string(), z.object({ text: z.string() })])).min(
    1,
    "give at least one document",
  ).max(MAX_INPUTS),
  top_n: z.number().int().min(1).nullish(),
  return_documents: z.boolean().default(false),
});
export type RerankRequest = z.infer<typeof RerankRequest>;
