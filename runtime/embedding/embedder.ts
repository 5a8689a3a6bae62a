// What a model that serves vectors offers the server: embeddings (many inputs, one batch, no KV
// kept) and relevance scores (a query against documents). Decoder models (Qwen3-Embedding) and
// BERT-family encoders both implement these; the server knows only this face. Inputs are text or
// token ids; the implementation tokenizes text with the model's own tokenizer (special tokens, as
// the model was trained: [CLS] … [SEP] for BERT, the EOS Qwen3-Embedding appends).

/** What a model can serve: a chat model generates; the other two only score. */
export type ModelKind = "chat" | "embedding" | "reranker";

/** One embedding input: text, or token ids given as they are (no special tokens added). */
export type EmbeddingInput = string | number[];

export interface Embeddings {
  /** One vector per input, in input order, pooled as the model's files say and L2-normalised. */
  vectors: Float32Array[];
  /** Tokens read, all inputs together (the usage block's prompt_tokens). */
  promptTokens: number;
}

export interface EmbedOptions {
  truncate?: boolean;
  signal?: AbortSignal;
  /** Tokens the whole batch may read (after truncation); more is an InvalidRequest naming it. */
  maxTotalTokens?: number;
}

export interface Embedder {
  /** The vector's length before any truncation. */
  readonly dimensions: number;
  /** Trained so that a prefix of the vector is itself an embedding (truncate, then renormalise). */
  readonly matryoshka: boolean;
  /** The longest input it reads, in tokens; a longer one is an error naming the limit. */
  readonly maxInputTokens: number;
  /**
   * Embeds a batch; rejects with InvalidRequest (runtime/errors/) on bad input: an empty input, a
   * token id outside the vocabulary, or an input over maxInputTokens unless `truncate` (Ollama's
   * default) keeps its first maxInputTokens tokens.
   */
  embed(inputs: EmbeddingInput[], options?: EmbedOptions): Promise<Embeddings>;
  /** Closes what it holds on the device (every byte). */
  close(): Promise<void>;
}

export interface Relevance {
  /** One score per document, in document order (a probability-like value: higher is closer). */
  scores: number[];
  promptTokens: number;
}

export interface Reranker {
  readonly maxInputTokens: number;
  /** Scores each (query, document) pair; a pair over maxInputTokens is truncated or refused as in embed. */
  rerank(query: string, documents: string[], options?: EmbedOptions): Promise<Relevance>;
  /** Closes what it holds on the device (every byte). */
  close(): Promise<void>;
}
