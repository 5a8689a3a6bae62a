// Text to an encoder's input ids with the model's own tokenizer.json (@huggingface/tokenizers:
// WordPiece with BertNormalizer and BertPreTokenizer for BERT, Unigram with Metaspace for XLM-R's
// SentencePiece), its post-processor adding the special tokens the model was trained with
// ([CLS] A [SEP] B [SEP] for BERT, <s> A </s></s> B </s> for XLM-R). Truncation keeps that frame:
// the content is cut, the closing special token kept, as Hugging Face's truncation does.

import { Tokenizer as HfTokenizer } from "@huggingface/tokenizers";
import { ModelLoadError } from "../model/errors.ts";
import { type EncoderSource, openEncoderSource } from "./source.ts";

export interface EncodedInput {
  ids: number[];
  /** Token types: 0, and 1 for a pair's second text where the tokenizer says so. */
  typeIds: number[];
}

/** An input over the limit that `truncate` was not asked to cut, or cannot be cut to fit. */
export class InputTooLong extends Error {
  constructor(readonly tokens: number, readonly limit: number, message: string) {
    super(message);
    this.name = "InputTooLong";
  }
}

export class EncoderTokenizer {
  readonly #inner: HfTokenizer;
  /** Number of ids the tokenizer can produce (its largest id + 1). */
  readonly vocabSize: number;

  constructor(tokenizerJson: unknown, tokenizerConfig: Record<string, unknown> = {}) {
    this.#inner = new HfTokenizer(tokenizerJson as object, tokenizerConfig);
    let max = -1;
    for (const id of this.#inner.get_vocab().values()) max = Math.max(max, id);
    this.vocabSize = max + 1;
  }

  /** The tokenizer of an encoder directory or GGUF file. */
  static async load(path: string): Promise<EncoderTokenizer> {
    return EncoderTokenizer.fromSource(await openEncoderSource(path));
  }

  /** The tokenizer of opened encoder files (tokenizer.json, or one rebuilt from GGUF). */
  static fromSource(source: EncoderSource): EncoderTokenizer {
    try {
      return new EncoderTokenizer(source.tokenizerJson, source.tokenizerConfig);
    } catch (e) {
      throw new ModelLoadError(
        source.path,
        `cannot build the tokenizer: ${(e as Error).message}`,
      );
    }
  }

  /** One text with the model's special tokens; over `limit`, cut (truncate) or refused. */
  encode(text: string, limit = Infinity, truncate = false): EncodedInput {
    const e = this.#inner.encode(text, { return_token_type_ids: true });
    return cut({ ids: e.ids, typeIds: e.token_type_ids }, limit, truncate, Infinity);
  }

  /** A (query, document) pair; over `limit`, the document is cut (truncate) or it is refused. */
  encodePair(query: string, document: string, limit = Infinity, truncate = false): EncodedInput {
    const e = this.#inner.encode(query, { text_pair: document, return_token_type_ids: true });
    const docTokens = truncate && e.ids.length > limit
      ? this.#inner.encode(document, { add_special_tokens: false }).ids.length
      : 0;
    return cut({ ids: e.ids, typeIds: e.token_type_ids }, limit, truncate, docTokens);
  }

  /**
   * Ids back to text (special tokens skipped unless asked for), as the tokenizer's decoder writes
   * it, without transformers' extra clean-up (which joins " 's" and the like).
   */
  decode(ids: number[], skipSpecialTokens = true): string {
    return this.#inner.decode(ids, {
      skip_special_tokens: skipSpecialTokens,
      clean_up_tokenization_spaces: false,
    });
  }

  /** Token strings of ids (for tests and logs). */
  tokens(ids: number[]): string[] {
    return ids.map((id) => this.#inner.id_to_token(id) ?? "");
  }
}

/**
 * Keeps `limit` tokens: all but the last `input.ids.length - limit` before the closing special
 * token, which stays. At most `cuttable` tokens may go (a pair's document), else it is refused.
 */
function cut(
  input: EncodedInput,
  limit: number,
  truncate: boolean,
  cuttable: number,
): EncodedInput {
  const n = input.ids.length;
  if (n <= limit) return input;
  const over = n - limit;
  if (!truncate) {
    throw new InputTooLong(n, limit, `the input has ${n} tokens, over the model's ${limit}`);
  }
  if (over > cuttable || limit < 2) {
    throw new InputTooLong(n, limit, `the query alone is over the model's ${limit} tokens`);
  }
  const keep = (a: number[]) => [...a.slice(0, limit - 1), a[n - 1]];
  return { ids: keep(input.ids), typeIds: keep(input.typeIds) };
}
