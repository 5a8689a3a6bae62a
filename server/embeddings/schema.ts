// The bodies of POST /v1/embeddings (OpenAI's), POST /v1/rerank (Jina's and Cohere's shape, which
// llama.cpp and vLLM serve too) and Ollama's /api/embed and /api/embeddings, checked with zod.

import { z } from "zod";
import { keepAliveField } from "../ollama/keep_alive.ts";

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

export const OllamaEmbedRequest = z.object({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.string()).min(1).max(MAX_INPUTS)]),
  truncate: z.boolean().default(true),
  dimensions: z.number().int().min(1).nullish(),
  options: z.record(z.string(), z.unknown()).nullish(),
  keep_alive: keepAliveField.nullish(),
});

export const OllamaEmbeddingsRequest = z.object({
  model: z.string().min(1),
  prompt: z.string(),
  options: z.record(z.string(), z.unknown()).nullish(),
  keep_alive: keepAliveField.nullish(),
});
