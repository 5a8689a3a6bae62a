// Text ↔ token ids and chat rendering for a model directory, built from the already-read tokenizer
// files (never the network): @huggingface/tokenizers for the tokenizer and @huggingface/jinja for
// the chat template, the two packages transformers.js is built on, used here as transformers.js's
// PreTrainedTokenizer used them (same special tokens, same template variables) without its ONNX
// Runtime.
//
// Text is encoded without special-token parsing: "<|im_end|>" typed in a message or a prompt is
// ordinary text, and only the chat template's own markup becomes control tokens (the twin
// tokenizer of hidden_control_tokens.ts does the encoding). Decoding uses the tokenizer as it is.

import { Tokenizer as HfTokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";
import { join } from "node:path";
import { ModelLoadError } from "../model/errors.ts";
import { type HiddenControlTokens, hideControlTokens } from "./hidden_control_tokens.ts";
import type { LlamaConfig } from "../model/config.ts";
import type { ModelFiles } from "../formats/model_files.ts";
import { type AddedToken, addedTokensWithin } from "../formats/added_tokens.ts";
import { TokenBytes, type TokenFamily } from "./token_bytes.ts";

export { StreamDecoder } from "./stream_decoder.ts";

/**
 * The vocabulary as tokenizer.json spells it, for whoever must match token strings against text
 * (a grammar's token masks): every id's string in id order (added and special tokens included; an
 * id with no token is ""), how those strings spell text, and whether encoding puts a space before
 * the text (SentencePiece's "▁" prefix).
 */
export interface Vocabulary {
  tokens: string[];
  family: TokenFamily;
  prependSpace: boolean;
}

/** A message as Hugging Face chat templates read it. */
export interface ChatMessage {
  role: string;
  content: string;
  /** An assistant's tool calls; templates read `arguments` as an object, not JSON text. */
  tool_calls?: ChatToolCall[];
  /** A tool message's answer: the call it answers. */
  tool_call_id?: string;
  name?: string;
}

export interface ChatToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: Record<string, unknown> };
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

/** The special tokens a chat template sees as variables (transformers' SPECIAL_TOKEN_ATTRIBUTES). */
const TEMPLATE_TOKEN_VARIABLES = [
  "bos_token",
  "eos_token",
  "unk_token",
  "sep_token",
  "pad_token",
  "cls_token",
  "mask_token",
];

/** JSON Schema tool definitions, as a template that supports function calling reads them. */
export type ChatTools = Record<string, unknown>[];

export interface ChatOptions {
  addGenerationPrompt?: boolean;
  /** Given to the template as `tools` (else null); picks a "tool_use" template if there is one. */
  tools?: ChatTools;
}

export class Tokenizer {
  /** Stop ids: the union of config.json, generation_config.json and the tokenizer's eos. */
  readonly eosTokenIds: number[];
  /** Number of ids the tokenizer can produce (its largest id + 1, added tokens included). */
  readonly vocabSize: number;
  readonly bosTokenId: number | null;
  readonly hasChatTemplate: boolean;
  /** Decodes. */
  readonly #inner: HfTokenizer;
  /** Encodes: the same tokenizer with its control tokens' text hidden. */
  readonly #textOnly: HfTokenizer;
  /** tokenizer_config.json's chat_template: one template, or several by name. */
  readonly #templates: string | Record<string, string> | null;
  /** Compiled templates by source (each model's own, and its markup twin). */
  readonly #compiled = new Map<string, Template>();
  /** Writes control tokens' hidden text in place of their text (templates only, never input). */
  readonly #hide: (text: string) => string;
  /** The special-token variables a template sees, as text and as hidden markup. */
  readonly #tokenVariables: Record<string, string>;
  readonly #markupVariables: Record<string, string>;
  readonly #bytes: TokenBytes;
  readonly #configPath: string;
  readonly #specialIds: Set<number>;
  readonly #tokenText: string[];

  constructor(files: TokenizerFiles) {
    const tokenizerPath = join(files.dir, "tokenizer.json");
    this.#configPath = join(files.dir, "tokenizer_config.json");
    if (
      files.tokenizerJson === null || typeof files.tokenizerJson !== "object" ||
      Array.isArray(files.tokenizerJson)
    ) {
      throw new ModelLoadError(tokenizerPath, "is not a JSON object");
    }
    const json = withoutSpecialsPastVocab(
      files.tokenizerJson as Record<string, unknown>,
      files.config.vocabSize,
    );
    const config = files.tokenizerConfig;
    let hidden: HiddenControlTokens;
    try {
      hidden = hideControlTokens(json as Record<string, unknown>);
      this.#inner = new HfTokenizer(json, config);
      this.#textOnly = new HfTokenizer(hidden.tokenizerJson, config);
      this.#templates = chatTemplates(config.chat_template);
    } catch (e) {
      throw new ModelLoadError(
        tokenizerPath,
        `cannot build the tokenizer: ${(e as Error).message}`,
      );
    }
    this.#hide = hidden.hide;
    let maxId = -1;
    const tokenText: string[] = [];
    for (const [text, id] of this.#inner.get_vocab()) {
      maxId = Math.max(maxId, id);
      tokenText[id] = text;
    }
    this.vocabSize = maxId + 1;
    this.#tokenText = tokenText;
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

    this.#tokenVariables = {};
    this.#markupVariables = {};
    for (const key of TEMPLATE_TOKEN_VARIABLES) {
      const value = tokenContent(config[key]);
      if (!value) continue;
      this.#tokenVariables[key] = value;
      this.#markupVariables[key] = hidden.hide(value);
    }
    const idOf = (key: string) => {
      const text = this.#tokenVariables[key];
      return text === undefined ? undefined : this.#inner.token_to_id(text);
    };

    const eos = new Set<number>(files.config.eosTokenIds);
    const genEos = files.generationConfig?.eos_token_id;
    for (const id of Array.isArray(genEos) ? genEos : [genEos]) {
      if (Number.isInteger(id)) eos.add(id as number);
    }
    const tokenizerEos = idOf("eos_token");
    if (Number.isInteger(tokenizerEos)) eos.add(tokenizerEos!);
    this.eosTokenIds = [...eos].sort((a, b) => a - b);

    const bos = files.config.bosTokenId ?? idOf("bos_token");
    this.bosTokenId = Number.isInteger(bos) ? bos! : null;
    this.hasChatTemplate = Boolean(this.#templates);
    this.#specialIds = new Set(
      [...this.#inner.get_added_tokens_decoder().values()].filter((t) => t.special).map((t) =>
        t.id
      ),
    );
  }

  /**
   * Token ids of `text`. Special-token strings in it are ordinary text; `addSpecialTokens` adds
   * what the tokenizer puts around a sequence (Llama's BOS).
   */
  encode(text: string, { addSpecialTokens = true }: { addSpecialTokens?: boolean } = {}): number[] {
    return this.#textOnly.encode(text, { add_special_tokens: addSpecialTokens }).ids;
  }

  decode(ids: readonly number[], { skipSpecial = false }: { skipSpecial?: boolean } = {}): string {
    if (ids.length === 0) return ""; // the tokenizer throws on an empty list
    return this.#inner.decode([...ids], { skip_special_tokens: skipSpecial });
  }

  vocabulary(): Vocabulary {
    const tokens = Array.from({ length: this.vocabSize }, (_, id) => this.#tokenText[id] ?? "");
    const first = this.encode("a", { addSpecialTokens: false })[0];
    return {
      tokens,
      family: this.#bytes.family,
      prependSpace: first !== undefined && tokens[first].startsWith("▁"),
    };
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

  /**
   * The template source a chat is rendered with (the "tool_use" one when tools are given and the
   * model has it), for readers that decide from its markup how the model calls tools; null: none.
   */
  chatTemplate(withTools = false): string | null {
    if (this.#templates === null) return null;
    try {
      return pickTemplate(this.#templates, withTools);
    } catch {
      return null; // several templates, none the default: rendering refuses with the reason
    }
  }

  /** The prompt text the model's chat_template makes of `messages`. */
  renderChat(messages: ChatMessage[], options: ChatOptions = {}): string {
    return this.#render(messages, options, false);
  }

  /**
   * Token ids of the rendered chat. The template's markup yields control tokens; the messages'
   * text never does, whatever it contains.
   */
  encodeChat(messages: ChatMessage[], options: ChatOptions = {}): number[] {
    const rendered = this.#render(messages, options, true);
    return this.#textOnly.encode(rendered, { add_special_tokens: false }).ids;
  }

  /**
   * Renders the chat template with the variables transformers' apply_chat_template gives it
   * (messages, add_generation_prompt, tools, documents, the special tokens; @huggingface/jinja adds
   * raise_exception and strftime_now). `markup`: the template and token variables write control
   * tokens' hidden text, for the text-only twin to encode.
   */
  #render(
    messages: ChatMessage[],
    { addGenerationPrompt = true, tools }: ChatOptions,
    markup: boolean,
  ): string {
    if (!this.hasChatTemplate) {
      throw new ChatTemplateError(
        `${this.#configPath} has no chat_template, so this model cannot take chat messages; ` +
          `send a plain prompt (/v1/completions) instead`,
      );
    }
    try {
      const source = pickTemplate(this.#templates!, tools !== undefined);
      return this.#compile(markup ? this.#hide(source) : source).render({
        messages,
        add_generation_prompt: addGenerationPrompt,
        tools: tools ?? null,
        documents: null,
        ...(markup ? this.#markupVariables : this.#tokenVariables),
      });
    } catch (e) {
      throw new ChatTemplateError(
        `the chat template rejected the messages: ${(e as Error).message}`,
      );
    }
  }

  #compile(source: string): Template {
    let template = this.#compiled.get(source);
    if (template === undefined) {
      template = new Template(source);
      this.#compiled.set(source, template);
    }
    return template;
  }
}

/**
 * tokenizer_config.json's chat_template: a string, or a list of {name, template} (Hugging Face's
 * form for several templates) made a record by name.
 */
function chatTemplates(value: unknown): string | Record<string, string> | null {
  if (!Array.isArray(value)) return typeof value === "string" && value !== "" ? value : null;
  const byName: Record<string, string> = Object.create(null);
  for (const { name, template } of value) {
    if (typeof name !== "string" || typeof template !== "string") {
      throw new Error('chat_template must be a list of objects with "name" and "template"');
    }
    byName[name] = template;
  }
  return byName;
}

/** As transformers' get_chat_template: "tool_use" when tools are given and it exists, else "default". */
function pickTemplate(templates: string | Record<string, string>, withTools: boolean): string {
  if (typeof templates === "string") return templates;
  if (withTools && "tool_use" in templates) return templates.tool_use;
  if ("default" in templates) return templates.default;
  throw new Error(
    `this model has several chat templates and none is named "default" ` +
      `(${Object.keys(templates).sort().join(", ")})`,
  );
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

/** tokenizer.json with only the added tokens the model can use (formats/added_tokens.ts). */
function withoutSpecialsPastVocab(
  json: Record<string, unknown>,
  vocabSize: number,
): Record<string, unknown> {
  const added = json.added_tokens as AddedToken[] | undefined;
  if (!added) return json;
  const kept = addedTokensWithin(added, vocabSize);
  return kept.length === added.length ? json : { ...json, added_tokens: kept };
}
