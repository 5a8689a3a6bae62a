// Embedding and reranking models for server tests, with no GPU: each character of a text is one
// token (its code point mod 256), a vector is a fixed function of the tokens and their positions,
// normalised; a relevance score is the share of the query's words found in the document. They keep
// the contract's rules (runtime/embedding/embedder.ts): empty input, ids outside the vocabulary,
// inputs over the limit unless truncated, and batches over maxTotalTokens are InvalidRequests.

import type {
  Embedder,
  EmbeddingInput,
  EmbedOptions,
  LoadedModel,
  Reranker,
} from "../../runtime/model_router.ts";
import { InvalidRequest } from "../../runtime/service.ts";

export const FAKE_VOCAB = 256;

export interface FakeEmbedderOptions {
  dimensions?: number;
  matryoshka?: boolean;
  maxInputTokens?: number;
}

/** The fake tokenizer: a text's characters. */
export const fakeTokens = (text: string) => [...text].map((ch) => ch.codePointAt(0)! % FAKE_VOCAB);

/** The vector the fake embedder gives these tokens (unnormalised, then normalised). */
export function fakeVector(tokens: number[], dimensions: number): Float32Array {
  const v = new Float32Array(dimensions);
  tokens.forEach((t, p) => {
    for (let j = 0; j < dimensions; j++) v[j] += Math.sin((t + 1) * (j + 1) * 0.37 + p * 0.11);
  });
  let sum = 0;
  for (const x of v) sum += x * x;
  return v.map((x) => x / Math.sqrt(sum || 1));
}

function tokensOf(input: EmbeddingInput, max: number, options: EmbedOptions, at: number) {
  const tokens = typeof input === "string" ? fakeTokens(input) : input;
  if (tokens.length === 0) {
    throw new InvalidRequest(`input[${at}] is empty`, "input", "empty_input");
  }
  const bad = tokens.find((t) => t >= FAKE_VOCAB);
  if (bad !== undefined) {
    throw new InvalidRequest(`token id ${bad} is outside the vocabulary`, "input", "invalid_value");
  }
  if (tokens.length > max) {
    if (options.truncate) return tokens.slice(0, max);
    throw new InvalidRequest(
      `input[${at}] has ${tokens.length} tokens, over this model's ${max}`,
      "input",
      "input_too_long",
    );
  }
  return tokens;
}

function checkTotal(total: number, options: EmbedOptions) {
  if (options.maxTotalTokens !== undefined && total > options.maxTotalTokens) {
    throw new InvalidRequest(
      `the inputs have ${total} tokens together, over the ${options.maxTotalTokens} a request may`,
      "input",
      "too_many_tokens",
    );
  }
}

export function fakeEmbedder(o: FakeEmbedderOptions = {}): Embedder & { batches: number[] } {
  const dimensions = o.dimensions ?? 8;
  const maxInputTokens = o.maxInputTokens ?? 64;
  const batches: number[] = [];
  return {
    dimensions,
    matryoshka: o.matryoshka ?? false,
    maxInputTokens,
    batches,
    embed(inputs, options = {}) {
      try {
        const tokens = inputs.map((input, i) => tokensOf(input, maxInputTokens, options, i));
        const total = tokens.reduce((s, t) => s + t.length, 0);
        checkTotal(total, options);
        batches.push(inputs.length);
        return Promise.resolve({
          vectors: tokens.map((t) => fakeVector(t, dimensions)),
          promptTokens: total,
        });
      } catch (err) {
        return Promise.reject(err);
      }
    },
    close: () => Promise.resolve(),
  };
}

export function fakeReranker(maxInputTokens = 256): Reranker {
  return {
    maxInputTokens,
    rerank(query, documents, options = {}) {
      try {
        const words = query.toLowerCase().split(/\W+/).filter(Boolean);
        let total = 0;
        const scores = documents.map((doc, i) => {
          const pair = `${query}\n${doc}`;
          total += tokensOf(pair, maxInputTokens, options, i).length;
          const have = new Set(doc.toLowerCase().split(/\W+/));
          return words.filter((w) => have.has(w)).length / Math.max(1, words.length);
        });
        checkTotal(total, options);
        return Promise.resolve({ scores, promptTokens: total });
      } catch (err) {
        return Promise.reject(err);
      }
    },
    close: () => Promise.resolve(),
  };
}

/** A model that only scores, as the router holds it. */
export function scoringModel(
  parts: { embedder?: Embedder; reranker?: Reranker },
): LoadedModel {
  return {
    kind: parts.embedder ? "embedding" : "reranker",
    chat: null,
    embedder: parts.embedder ?? null,
    reranker: parts.reranker ?? null,
    deviceBytes: 0,
    hostBytes: 0,
    inFlight: () => 0,
    close: () => Promise.resolve(),
  };
}
