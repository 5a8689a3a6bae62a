// A model the router holds: what it can serve (a chat model's runtime, tokenizer and prompt
// encoder; an embedding or reranking model's scorer), what it holds on each tier, and how to end
// it. `close` frees every byte: the runtime ends its requests and closes its engine (the Worker
// and its WebGPU device go with it), the scorers destroy their buffers.

import type { Embedder, ModelKind, Reranker } from "./embedding/embedder.ts";
import type { PromptEncoder, Runtime, Tokenizer } from "./service.ts";

export interface ChatParts {
  runtime: Runtime;
  tokenizer: Tokenizer;
  prompts: PromptEncoder;
}

export interface LoadedModel {
  kind: ModelKind;
  /** A chat model's parts; null for a model that only scores. */
  chat: ChatParts | null;
  embedder: Embedder | null;
  reranker: Reranker | null;
  /** Bytes it holds on the device (weights and KV) and on the host (the host KV tier). */
  deviceBytes: number;
  hostBytes: number;
  /** Requests it is running, queuing or still streaming: a model with any is never unloaded. */
  inFlight(): number;
  close(): Promise<void>;
}

/**
 * A model that only scores (an encoder) as a LoadedModel: its calls counted, so the router never
 * unloads it mid-request.
 */
export function scoringModel(
  parts: { embedder?: Embedder; reranker?: Reranker; deviceBytes: number },
): LoadedModel {
  let running = 0;
  const counted =
    <A extends unknown[], R>(fn: (...args: A) => Promise<R>) => async (...args: A): Promise<R> => {
      running++;
      try {
        return await fn(...args);
      } finally {
        running--;
      }
    };
  const { embedder, reranker } = parts;
  return {
    kind: embedder ? "embedding" : "reranker",
    chat: null,
    embedder: embedder
      ? { ...embedderFace(embedder), embed: counted(embedder.embed.bind(embedder)) }
      : null,
    reranker: reranker
      ? {
        maxInputTokens: reranker.maxInputTokens,
        rerank: counted(reranker.rerank.bind(reranker)),
        close: () => reranker.close(),
      }
      : null,
    deviceBytes: parts.deviceBytes,
    hostBytes: 0,
    inFlight: () => running,
    close: async () => {
      await embedder?.close();
      await reranker?.close();
    },
  };
}

function embedderFace(e: Embedder): Embedder {
  return {
    dimensions: e.dimensions,
    matryoshka: e.matryoshka,
    maxInputTokens: e.maxInputTokens,
    embed: e.embed.bind(e),
    close: () => e.close(),
  };
}

/** A chat model's runtime as a LoadedModel. */
export function chatModel(chat: ChatParts, extra: Partial<LoadedModel> = {}): LoadedModel {
  const info = chat.runtime.info;
  return {
    kind: "chat",
    chat,
    embedder: null,
    reranker: null,
    deviceBytes: info.weightBytes + info.kvBytes,
    hostBytes: info.hostBlocks * info.kvBlockBytes,
    inFlight: () => chat.runtime.openRequests,
    close: async () => {
      chat.runtime.drain();
      chat.prompts.close();
      await chat.runtime.close();
    },
    ...extra,
  };
}
