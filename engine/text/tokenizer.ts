// Text ↔ token ids and chat rendering for a model directory, through transformers.js built from
// the already-read tokenizer files (never the network).
//
// Text is encoded without special-token parsing: "<|im_end|>" typed in a message or a prompt is
// ordinary text, and only the chat template's own markup becomes control tokens (the twin
// tokenizer of hidden_control_tokens.ts does the encoding). Decoding uses the tokenizer as it is.

import * as transformers from "@huggingface/transformers";
import { PreTrainedTokenizer } from "@huggingface/transformers";
import { join } from "node:path";
import { ModelLoadError } from "../model/errors.ts";
import { type HiddenControlTokens, hideControlTokens } from "./hidden_control_tokens.ts";
import type { LlamaConfig } from "../model/config.ts";
import type { ModelFiles } from "../formats/model_files.ts";
import { TokenBytes } from "./token_bytes.ts";

export { StreamDecoder } from "./stream_decoder.ts";

export interface ChatMessage {
  role: string;
  content: string;
}

/** What a tokenizer is built from: the tokenizer files, and config.json's ids. */
export type TokenizerFiles =
  & Pick<ModelFiles, "dir" | "tokenizerJson" | "tokenizerConfig" | "generationConfig">
  & { config: Pick<LlamaConfig, "vocabSize" | "eosTokenIds" | "bosTokenId"> };

/** The model cannot render this conversation (no template, or the template rejected it). */
export class ChatTemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ChatTemplateError";
  }
}

/** The variables transformers.js gives a chat template for the tokenizer's special tokens. */
const TEMPLATE_TOKEN_VARIABLES = [
  "bos_token",
  "eos_token",
  "unk_token",
  "sep_token",
  "pad_token",
  "cls_token",
  "mask_token",
];

export class Tokenizer {
  /** Stop ids: the union of config.json, generation_config.json and the tokenizer's eos. */
  readonly eosTokenIds: number[];
  /** Number of ids the tokenizer can produce (its largest id + 1, added tokens included). */
  readonly vocabSize: number;
  readonly bosTokenId: number | null;
  readonly hasChatTemplate: boolean;
  /** Decodes, and renders chat templates. */
  readonly #inner: PreTrainedTokenizer;
  /** Encodes: the same tokenizer with its control tokens' text hidden. */
  readonly #textOnly: PreTrainedTokenizer;
  /** The chat template and its special-token variables, writing control tokens' hidden text. */
  readonly #markupTemplate: string | null;
  readonly #markupVariables: Record<string, string>;
  readonly #bytes: TokenBytes;
  readonly #configPath: string;
  readonly #specialIds: Set<number>;

  constructor(files: TokenizerFiles) {
    const tokenizerPath = join(files.dir, "tokenizer.json");
    this.#configPath = join(files.dir, "tokenizer_config.json");
    const json = files.tokenizerJson;
    if (json === null || typeof json !== "object" || Array.isArray(json)) {
      throw new ModelLoadError(tokenizerPath, "is not a JSON object");
    }
    const Class = tokenizerClass(files.tokenizerConfig);
    let hidden: HiddenControlTokens;
    try {
      hidden = hideControlTokens(json as Record<string, unknown>);
      this.#inner = new Class(json, files.tokenizerConfig);
      this.#textOnly = new Class(hidden.tokenizerJson, files.tokenizerConfig);
    } catch (e) {
      throw new ModelLoadError(
        tokenizerPath,
        `cannot build the tokenizer: ${(e as Error).message}`,
      );
    }
    let maxId = -1;
    const tokenText: string[] = [];
    for (const [text, id] of this.#inner.get_vocab()) {
      maxId = Math.max(maxId, id);
      tokenText[id] = text;
    }
    this.vocabSize = maxId + 1;
    if (this.vocabSize > files.config.vocabSize) {
      throw new ModelLoadError(
        tokenizerPath,
        `tokenizer has ids up to ${maxId} but config.json vocab_size is ${files.config.vocabSize}`,
      );
    }
    const added = (json as { added_tokens?: { id: number }[] }).added_tokens ?? [];
    this.#bytes = new TokenBytes(
      (json as { decoder?: unknown }).decoder,
      (id) => tokenText[id],
      added.map((t) => t.id),
    );

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

    let template: string | null = null;
    try {
      if (this.hasChatTemplate) template = this.#inner.get_chat_template();
    } catch {
      // Several templates and none is the default: rendering says so, with either template.
    }
    this.#markupTemplate = template === null ? null : hidden.hide(template);
    this.#markupVariables = {};
    for (const key of TEMPLATE_TOKEN_VARIABLES) {
      const value = tokenContent(files.tokenizerConfig[key]);
      if (value !== null) this.#markupVariables[key] = hidden.hide(value);
    }
  }

  /**
   * Token ids of `text`. Special-token strings in it are ordinary text; `addSpecialTokens` adds
   * what the tokenizer puts around a sequence (Llama's BOS).
   */
  encode(text: string, { addSpecialTokens = true }: { addSpecialTokens?: boolean } = {}): number[] {
    return this.#textOnly.encode(text, { add_special_tokens: addSpecialTokens });
  }

  decode(ids: readonly number[], { skipSpecial = false }: { skipSpecial?: boolean } = {}): string {
    if (ids.length === 0) return ""; // transformers.js throws on an empty list
    return this.#inner.decode([...ids], { skip_special_tokens: skipSpecial });
  }

  isSpecial(id: number): boolean {
    return this.#specialIds.has(id);
  }

  /**
   * How many bytes at the end of `ids`' text (0–3) begin a UTF-8 character that later tokens can
   * still complete: what a stream must hold back.
   */
  incompleteUtf8Tail(
    ids: readonly number[],
    { skipSpecial = false }: { skipSpecial?: boolean } = {},
  ): number {
    return this.#bytes.incompleteTail(ids, skipSpecial ? (id) => this.isSpecial(id) : undefined);
  }

  /** The prompt text the model's chat_template makes of `messages`. */
  renderChat(
    messages: ChatMessage[],
    { addGenerationPrompt = true }: { addGenerationPrompt?: boolean } = {},
  ): string {
    return this.#render(messages, addGenerationPrompt, {});
  }

  /**
   * Token ids of the rendered chat. The template's markup yields control tokens; the messages'
   * text never does, whatever it contains.
   */
  encodeChat(
    messages: ChatMessage[],
    { addGenerationPrompt = true }: { addGenerationPrompt?: boolean } = {},
  ): number[] {
    const rendered = this.#render(messages, addGenerationPrompt, {
      chat_template: this.#markupTemplate,
      ...this.#markupVariables,
    });
    return this.#textOnly.encode(rendered, { add_special_tokens: false });
  }

  #render(
    messages: ChatMessage[],
    addGenerationPrompt: boolean,
    overrides: Record<string, unknown>,
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
        ...overrides,
      }) as string;
    } catch (e) {
      throw new ChatTemplateError(
        `the chat template rejected the messages: ${(e as Error).message}`,
      );
    }
  }
}

/** A special token's text as tokenizer_config.json gives it (a string or an AddedToken). */
function tokenContent(value: unknown): string | null {
  if (typeof value === "string") return value;
  if (value !== null && typeof value === "object") {
    const content = (value as { content?: unknown }).content;
    if (typeof content === "string") return content;
  }
  return null;
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
