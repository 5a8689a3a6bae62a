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
