// Embeddings from a decoder model (Qwen3-Embedding): each input runs as a prefill-only request
// through the runtime's scheduler, batched and chunked like any prompt, its KV blocks freed when
// it ends; the engine reads back the final-normed hidden states its pooling needs (Runtime.pool),
// and the vector is L2-normalised here when the model's files say so.
//
// Text is tokenized as the model's own tokenizer does, post-processor included. Qwen3-Embedding
// pools the last token, which must be `<|endoftext|>`: its tokenizer.json appends it (a
// TemplateProcessing post-processor, added to the checkpoints after release), and older copies of
// the tokenizer do not, so a last-token model's text input that does not end with it gets it
// appended, as the model card's own code does. Token-id inputs are taken as they are.

import { openModelDir } from "../../engine/formats/open_model.ts";
import {
  type PoolingConfig,
  type PoolingMode,
  readPoolingConfig,
} from "../../engine/formats/pooling_config.ts";
import type { Tokenizer } from "../../engine/text/tokenizer.ts";
import { InvalidRequest } from "../errors/invalid_request.ts";
import type { Embedder, EmbeddingInput, Embeddings, EmbedOptions } from "./embedder.ts";
import { checkVocabulary } from "./token_ids.ts";

/** What an embedder needs of the runtime (runtime/service.ts's Runtime is one). */
export interface PoolingRuntime {
  readonly info: { readonly maxContext: number; readonly vocabSize: number };
  /** The pooled final-normed hidden states of `ids`, not normalised (Runtime.pool). */
  pool(ids: number[], pooling: PoolingMode, signal?: AbortSignal): Promise<Float32Array>;
  close(): Promise<void>;
}

/** What a decoder embedder is built from. */
export interface DecoderEmbedderParts {
  /** The runtime over the model's engine (its scheduler batches the inputs). */
  runtime: PoolingRuntime;
  tokenizer: Tokenizer;
  pooling: PoolingConfig;
  /** The model's hidden size: the vector's length. */
  dimensions: number;
  /** Trained for truncated vectors (Qwen3-Embedding is: MRL). */
  matryoshka?: boolean;
}

/** The token a last-token embedding model's text ends with (Qwen's end of text). */
export const END_OF_TEXT = "<|endoftext|>";

export class DecoderEmbedder implements Embedder {
  readonly dimensions: number;
  readonly matryoshka: boolean;
  private readonly runtime: PoolingRuntime;
  private readonly tokenizer: Tokenizer;
  private readonly pooling: PoolingConfig;
  /** The id appended to text input (last-token pooling only), or null. */
  private readonly endOfText: number | null;

  constructor(parts: DecoderEmbedderParts) {
    this.runtime = parts.runtime;
    this.tokenizer = parts.tokenizer;
    this.pooling = parts.pooling;
    this.dimensions = parts.dimensions;
    this.matryoshka = parts.matryoshka ?? false;
    this.endOfText = parts.pooling.mode === "last" ? tokenId(parts.tokenizer, END_OF_TEXT) : null;
  }

  /**
   * An embedder for the model at `modelDir` served by `runtime`: its pooling from its
   * sentence-transformers files, or, where it has none (a GGUF file, a bare checkpoint),
   * Qwen3-Embedding's: the last token, normalised.
   */
  static async open(
    modelDir: string,
    runtime: PoolingRuntime,
    tokenizer: Tokenizer,
  ): Promise<DecoderEmbedder> {
    const files = await openModelDir(modelDir);
    const dir = files.gguf ? null : files.dir;
    const pooling = (dir ? await readPoolingConfig(dir) : null) ??
      { mode: "last", normalize: true };
    // Qwen3-Embedding is trained with MRL (its card: custom dimensions 32 to its size).
    const matryoshka = files.config.architecture === "qwen3" && pooling.mode === "last";
    return new DecoderEmbedder({
      runtime,
      tokenizer,
      pooling,
      dimensions: files.config.hiddenSize,
      matryoshka,
    });
  }

  /** The model's context: a pooled prompt generates nothing, so it may fill all of it. */
  get maxInputTokens(): number {
    return this.runtime.info.maxContext;
  }

  async embed(inputs: EmbeddingInput[], options: EmbedOptions = {}): Promise<Embeddings> {
    const ids = inputs.map((input, i) => this.inputIds(input, i, options.truncate ?? false));
    // Every input is submitted before any is awaited, so the scheduler batches them.
    const pooled = ids.map((one) => this.runtime.pool(one, this.pooling.mode, options.signal));
    const vectors = await Promise.all(pooled);
    if (this.pooling.normalize) vectors.forEach(normalizeInPlace);
    return { vectors, promptTokens: ids.reduce((n, one) => n + one.length, 0) };
  }

  /** Closes the runtime, and with it the engine's every device object. */
  close(): Promise<void> {
    return this.runtime.close();
  }

  /** An input's ids: checked, tokenized (text), truncated where asked. */
  private inputIds(input: EmbeddingInput, index: number, truncate: boolean): number[] {
    const param = `input[${index}]`;
    let ids: number[];
    /** The id text input ends with, kept last by truncation (as the post-processor adds it after). */
    let end: number | null = null;
    if (typeof input === "string") {
      if (input.length === 0) throw new InvalidRequest(`${param} is empty`, param, "invalid_value");
      ids = this.tokenizer.encode(input);
      end = this.endOfText;
      if (end !== null && ids.at(-1) !== end) ids.push(end);
    } else {
      ids = input;
      const vocab = this.runtime.info.vocabSize;
      checkVocabulary(ids, vocab, param);
    }
    if (ids.length === 0) throw new InvalidRequest(`${param} is empty`, param, "invalid_value");
    const max = this.maxInputTokens;
    if (ids.length > max) {
      if (!truncate) {
        throw new InvalidRequest(
          `${param} is ${ids.length} tokens; this model reads at most ${max}`,
          param,
          "context_length_exceeded",
        );
      }
      ids = end === null ? ids.slice(0, max) : [...ids.slice(0, max - 1), end];
    }
    return ids;
  }
}

/** x / |x|₂, in place (a zero vector stays zero). */
export function normalizeInPlace(x: Float32Array): void {
  let squares = 0;
  for (const v of x) squares += v * v;
  const norm = Math.sqrt(squares);
  if (norm > 0) { for (let i = 0; i < x.length; i++) x[i] /= norm; }
}

/** The id of the token whose text is exactly `text`, or null where the vocabulary has none. */
export function tokenId(tokenizer: Tokenizer, text: string): number | null {
  const id = tokenizer.vocabulary().tokens.indexOf(text);
  return id >= 0 ? id : null;
}
