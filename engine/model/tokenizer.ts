// Text ↔ token ids and chat rendering for a model directory, through transformers.js built from
// the already-read tokenizer files (never the network). StreamDecoder turns ids arriving one at a
// time into text deltas that never split a character.

import * as transformers from "@huggingface/transformers";
import { PreTrainedTokenizer } from "@huggingface/transformers";
import { join } from "node:path";
import { ModelLoadError } from "./errors.ts";
import type { ModelFiles } from "./model_dir.ts";

export interface ChatMessage {
  role: string;
  content: string;
}

/** The model cannot render this conversation (no template, or the template rejected it). */
export class ChatTemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ChatTemplateError";
  }
}

export class Tokenizer {
  /** Stop ids: the union of config.json, generation_config.json and the tokenizer's eos. */
  readonly eosTokenIds: number[];
  /** Number of ids the tokenizer can produce (its largest id + 1, added tokens included). */
  readonly vocabSize: number;
  readonly bosTokenId: number | null;
  readonly hasChatTemplate: boolean;
  readonly #inner: PreTrainedTokenizer;
  readonly #configPath: string;
  readonly #specialIds: Set<number>;

  constructor(files: ModelFiles) {
    const tokenizerPath = join(files.dir, "tokenizer.json");
    this.#configPath = join(files.dir, "tokenizer_config.json");
    try {
      this.#inner = new (tokenizerClass(files.tokenizerConfig))(
        files.tokenizerJson,
        files.tokenizerConfig,
      );
    } catch (e) {
      throw new ModelLoadError(
        tokenizerPath,
        `cannot build the tokenizer: ${(e as Error).message}`,
      );
    }
    let maxId = -1;
    for (const id of this.#inner.get_vocab().values()) maxId = Math.max(maxId, id);
    this.vocabSize = maxId + 1;
    if (this.vocabSize > files.config.vocabSize) {
      throw new ModelLoadError(
        tokenizerPath,
        `tokenizer has ids up to ${maxId} but config.json vocab_size is ${files.config.vocabSize}`,
      );
    }

    const eos = new Set<number>(files.config.eosTokenIds);
    const genEos = files.generationConfig?.eos_token_id;
    for (const id of Array.isArray(genEos) ? genEos : [genEos]) {
      if (Number.isInteger(id)) eos.add(id as number);
    }
    if (Number.isInteger(this.#inner.eos_token_id)) eos.add(this.#inner.eos_token_id);
    this.eosTokenIds = [...eos].sort((a, b) => a - b);

    const bos = files.config.bosTokenId ?? this.#inner.bos_token_id;
    this.bosTokenId = Number.isInteger(bos) ? bos : null;
    this.hasChatTemplate = Boolean(this.#inner.chat_template);
    this.#specialIds = new Set(this.#inner.all_special_ids);
  }

  encode(text: string, { addSpecialTokens = true }: { addSpecialTokens?: boolean } = {}): number[] {
    return this.#inner.encode(text, { add_special_tokens: addSpecialTokens });
  }

  decode(ids: readonly number[], { skipSpecial = false }: { skipSpecial?: boolean } = {}): string {
    if (ids.length === 0) return ""; // transformers.js throws on an empty list
    return this.#inner.decode([...ids], { skip_special_tokens: skipSpecial });
  }

  isSpecial(id: number): boolean {
    return this.#specialIds.has(id);
  }

  /** The prompt text the model's chat_template makes of `messages`. */
  renderChat(
    messages: ChatMessage[],
    { addGenerationPrompt = true }: { addGenerationPrompt?: boolean } = {},
  ): string {
    if (!this.hasChatTemplate) {
      throw new ChatTemplateError(
        `${this.#configPath} has no chat_template, so this model cannot take chat messages; ` +
          `send a plain prompt (/v1/completions) instead`,
      );
    }
    try {
      return this.#inner.apply_chat_template(messages, {
        tokenize: false,
        add_generation_prompt: addGenerationPrompt,
      }) as string;
    } catch (e) {
      throw new ChatTemplateError(
        `the chat template rejected the messages: ${(e as Error).message}`,
      );
    }
  }

  /** Token ids of the rendered chat; the template places any special tokens itself. */
  encodeChat(
    messages: ChatMessage[],
    options: { addGenerationPrompt?: boolean } = {},
  ): number[] {
    return this.encode(this.renderChat(messages, options), { addSpecialTokens: false });
  }
}

// Like AutoTokenizer: use the class tokenizer_config.json names when transformers.js has it.
function tokenizerClass(config: Record<string, unknown>): typeof PreTrainedTokenizer {
  const name = String(config.tokenizer_class ?? "").replace(/Fast$/, "");
  const cls = (transformers as Record<string, unknown>)[name];
  if (typeof cls === "function" && cls.prototype instanceof PreTrainedTokenizer) {
    return cls as typeof PreTrainedTokenizer;
  }
  return PreTrainedTokenizer;
}

/**
 * Incremental detokenizer. Each push decodes a short window (the previous delta's tokens plus the
 * new ones) and emits only what extends the previous text, holding back while the window ends in
 * an incomplete UTF-8 sequence. The window matters for tokenizers whose decoding of a token
 * depends on its neighbours (leading-space handling); concatenating every delta and flush()
 * gives decode(all ids).
 */
export class StreamDecoder {
  readonly #tokenizer: Tokenizer;
  readonly #skipSpecial: boolean;
  readonly #ids: number[] = [];
  /** Start of the window: the first token of the last emitted delta. */
  #prefixOffset = 0;
  /** Tokens before this index have been emitted. */
  #readOffset = 0;

  constructor(tokenizer: Tokenizer, { skipSpecial = false }: { skipSpecial?: boolean } = {}) {
    this.#tokenizer = tokenizer;
    this.#skipSpecial = skipSpecial;
  }

  /** Adds one id; returns the newly stable text (often "", e.g. mid-character). */
  push(id: number): string {
    this.#ids.push(id);
    return this.#emit(false);
  }

  /** Returns whatever is still held back (an incomplete character decodes to U+FFFD). */
  flush(): string {
    return this.#emit(true);
  }

  #emit(final: boolean): string {
    const opts = { skipSpecial: this.#skipSpecial };
    const prefix = this.#tokenizer.decode(
      this.#ids.slice(this.#prefixOffset, this.#readOffset),
      opts,
    );
    const full = this.#tokenizer.decode(this.#ids.slice(this.#prefixOffset), opts);
    if (full.length <= prefix.length) return "";
    if (!final && full.endsWith("\uFFFD")) return "";
    this.#prefixOffset = this.#readOffset;
    this.#readOffset = this.#ids.length;
    return full.slice(prefix.length);
  }
}
