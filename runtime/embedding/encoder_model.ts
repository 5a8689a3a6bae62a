// BERT-family encoders behind the embedding face (embedder.ts): an Embedder for a base model, a
// Reranker for a SequenceClassification one. Text is tokenized with the model's own tokenizer
// (its special tokens, a pair for a reranker), inputs are packed into as few passes as the token
// budget allows, and passes run one at a time (the model's activations are one set of buffers).
//
// Pooling: as the directory's sentence-transformers modules.json says (readPoolingConfig); a
// directory without one is pooled by mean, sentence-transformers' own default when it wraps a plain
// transformer. Vectors are always L2-normalised (the face promises it). Relevance: one label, the
// sigmoid of its logit; two labels, the softmax probability of the second ("relevant").

import {
  type EncodedInput,
  type EncoderInput,
  EncoderModel,
  EncoderTokenizer,
  InputTooLong,
  type PoolMode,
} from "../../engine/encoder/encoder.ts";
import type { PoolingMode } from "../../engine/formats/pooling_config.ts";
import { InvalidRequest } from "../errors/invalid_request.ts";
import type {
  Embedder,
  EmbeddingInput,
  Embeddings,
  EmbedOptions,
  Relevance,
  Reranker,
} from "./embedder.ts";
import { checkVocabulary } from "./token_ids.ts";

const POOL_MODES: Record<PoolingMode, PoolMode> = { cls: "first", mean: "mean", last: "last" };

/** The model and tokenizer an embedder and a reranker share, and the one-pass-at-a-time queue. */
class EncoderRunner {
  #queue: Promise<unknown> = Promise.resolve();

  constructor(readonly model: EncoderModel, readonly tokenizer: EncoderTokenizer) {}

  get maxInputTokens(): number {
    return this.model.config.maxInputTokens;
  }

  /** Runs `inputs` in passes of at most the model's token and input budgets, in order. */
  run(
    inputs: EncoderInput[],
    signal: AbortSignal | undefined,
    pass: (batch: EncoderInput[]) => Promise<Float32Array[]>,
  ): Promise<Float32Array[]> {
    const work = this.#queue.then(async () => {
      const out: Float32Array[] = [];
      for (const batch of passes(inputs, this.model.maxBatchTokens, this.model.maxBatchInputs)) {
        signal?.throwIfAborted();
        out.push(...await pass(batch));
      }
      return out;
    });
    this.#queue = work.catch(() => {});
    return work;
  }

  /** Text through the tokenizer, refusals as InvalidRequest naming `param`. */
  encodeText(text: string, param: string, truncate: boolean, pair?: string): EncodedInput {
    if (text.length === 0) throw new InvalidRequest(`${param} is empty`, param, "invalid_value");
    try {
      return pair === undefined
        ? this.tokenizer.encode(text, this.maxInputTokens, truncate)
        : this.tokenizer.encodePair(text, pair, this.maxInputTokens, truncate);
    } catch (e) {
      if (e instanceof InputTooLong) {
        throw new InvalidRequest(
          `${param}: ${e.message} (${e.limit} tokens at most)`,
          param,
          "context_length_exceeded",
        );
      }
      throw e;
    }
  }

  /** Token types as the model has them: a model with one type (XLM-R) reads only type 0. */
  types(e: EncodedInput): EncoderInput {
    return this.model.config.typeVocabSize > 1 ? e : { ids: e.ids };
  }
}

/** Consecutive groups of inputs, each within `tokens` tokens and `count` inputs. */
export function* passes<T extends { ids: readonly number[] }>(
  inputs: T[],
  tokens: number,
  count: number,
): Generator<T[]> {
  let batch: T[] = [];
  let used = 0;
  for (const input of inputs) {
    if (batch.length > 0 && (used + input.ids.length > tokens || batch.length >= count)) {
      yield batch;
      batch = [];
      used = 0;
    }
    batch.push(input);
    used += input.ids.length;
  }
  if (batch.length > 0) yield batch;
}

/** A request's inputs together within `max` tokens (EmbedOptions.maxTotalTokens). */
function checkTotal(inputs: { ids: readonly number[] }[], max: number | undefined, param: string) {
  const total = inputs.reduce((a, x) => a + x.ids.length, 0);
  if (max !== undefined && total > max) {
    throw new InvalidRequest(
      `the request's inputs have ${total} tokens together; one request may read ${max}`,
      param,
      "too_many_tokens",
    );
  }
}

export class EncoderEmbedder implements Embedder {
  readonly dimensions: number;
  /** Nothing in a BERT-family directory says it was trained so; not claimed. */
  readonly matryoshka = false;
  readonly maxInputTokens: number;
  readonly #runner: EncoderRunner;
  readonly #pool: PoolMode;

  constructor(model: EncoderModel, tokenizer: EncoderTokenizer, pooling: PoolingMode) {
    this.#runner = new EncoderRunner(model, tokenizer);
    this.#pool = POOL_MODES[pooling];
    this.dimensions = model.config.hiddenSize;
    this.maxInputTokens = model.config.maxInputTokens;
  }

  async embed(inputs: EmbeddingInput[], options: EmbedOptions = {}): Promise<Embeddings> {
    const truncate = options.truncate ?? false;
    if (inputs.length === 0) throw new InvalidRequest("input is empty", "input", "invalid_value");
    const encoded = inputs.map((x, i) =>
      typeof x === "string"
        ? this.#runner.types(this.#runner.encodeText(x, `input[${i}]`, truncate))
        : { ids: this.#checkIds(x, i, truncate) }
    );
    checkTotal(encoded, options.maxTotalTokens, "input");
    const model = this.#runner.model;
    const vectors = await this.#runner.run(
      encoded,
      options.signal,
      (batch) => model.pooled(batch, this.#pool),
    );
    return {
      vectors: vectors.map(normalise),
      promptTokens: encoded.reduce((a, x) => a + x.ids.length, 0),
    };
  }

  /** Token ids as given: each in the vocabulary, none missing, cut to the limit if asked. */
  #checkIds(ids: number[], i: number, truncate: boolean): number[] {
    const param = `input[${i}]`;
    if (ids.length === 0) throw new InvalidRequest(`${param} is empty`, param, "invalid_value");
    const vocab = this.#runner.model.config.vocabSize;
    checkVocabulary(ids, vocab, param);
    if (ids.length <= this.maxInputTokens) return ids;
    if (truncate) return ids.slice(0, this.maxInputTokens);
    throw new InvalidRequest(
      `${param} has ${ids.length} tokens; this model reads ${this.maxInputTokens} at most`,
      param,
      "context_length_exceeded",
    );
  }

  close(): Promise<void> {
    this.#runner.model.close();
    return Promise.resolve();
  }
}

export class EncoderReranker implements Reranker {
  readonly maxInputTokens: number;
  readonly #runner: EncoderRunner;

  constructor(model: EncoderModel, tokenizer: EncoderTokenizer) {
    const labels = model.config.classifier?.numLabels;
    if (labels !== 1 && labels !== 2) {
      throw new Error(`a reranker needs a classifier of 1 or 2 labels (this one has ${labels})`);
    }
    this.#runner = new EncoderRunner(model, tokenizer);
    this.maxInputTokens = model.config.maxInputTokens;
  }

  async rerank(query: string, documents: string[], options: EmbedOptions = {}): Promise<Relevance> {
    const truncate = options.truncate ?? false;
    if (query.length === 0) throw new InvalidRequest("query is empty", "query", "invalid_value");
    if (documents.length === 0) {
      throw new InvalidRequest("documents is empty", "documents", "invalid_value");
    }
    const pairs = documents.map((d, i) => {
      if (d.length === 0) {
        throw new InvalidRequest(`documents[${i}] is empty`, `documents[${i}]`, "invalid_value");
      }
      return this.#runner.types(this.#runner.encodeText(query, `documents[${i}]`, truncate, d));
    });
    checkTotal(pairs, options.maxTotalTokens, "documents");
    const model = this.#runner.model;
    const logits = await this.#runner.run(pairs, options.signal, (batch) => model.logits(batch));
    return {
      scores: logits.map(relevance),
      promptTokens: pairs.reduce((a, x) => a + x.ids.length, 0),
    };
  }

  close(): Promise<void> {
    this.#runner.model.close();
    return Promise.resolve();
  }
}

/** One logit: its sigmoid; two: the softmax probability of the second label. */
export function relevance(logits: Float32Array): number {
  const z = logits.length === 1 ? logits[0] : logits[1] - logits[0];
  return 1 / (1 + Math.exp(-z));
}

function normalise(v: Float32Array): Float32Array {
  let s = 0;
  for (const x of v) s += x * x;
  const inv = s > 0 ? 1 / Math.sqrt(s) : 0;
  return v.map((x) => x * inv);
}
