// Writes a Hugging Face tokenizer (tokenizer.json and tokenizer_config.json) as GGUF tokenizer.*
// metadata, the way llama.cpp's converter does, so that tests and the benchmarks' converted models
// carry real vocabularies: the reverse of gguf_tokenizer.ts.
//
// - A byte-level BPE becomes a "gpt2" vocabulary: tokens, merges, and the tokenizer.ggml.pre name
//   of its pre-tokenizer (gguf_pre_tokenizers.ts tells it by its cuts).
// - A BPE with byte fallback (SentencePiece's, as transformers converts Llama 2) becomes a "llama"
//   vocabulary with scores. tokenizer.json keeps no SentencePiece scores, but its merges are
//   SentencePiece's ranking (transformers orders them by the merged piece's score), so a piece
//   scores minus the rank of its first merge, and a piece no merge makes scores below all of them.
//
// Token types as the converter sets them: added special tokens are control (the unknown token is
// unknown), other added tokens user-defined, <0xNN> pieces of a byte-fallback vocabulary byte,
// ids without a token "[PADn]" and unused. BOS/EOS are added as tokenizer_config.json says, else
// as the post-processor does.

import { ModelLoadError } from "../model/errors.ts";
import { addedTokensWithin } from "./added_tokens.ts";
import { preTokenizerName } from "./gguf_pre_tokenizers.ts";
import { type GgufMeta, meta } from "./gguf_writer.ts";

const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, userDefined: 4, unused: 5, byte: 6 };

interface TokenizerJson {
  model: {
    type?: string;
    vocab: Record<string, number>;
    merges: (string | [string, string])[];
    byte_fallback?: boolean;
  };
  added_tokens?: { id: number; content: string; special: boolean }[];
  normalizer?: Record<string, unknown> | null;
  pre_tokenizer?: Record<string, unknown> | null;
  post_processor?: Record<string, unknown> | null;
}

export interface TokenizerMetadataOptions {
  /** tokenizer.ggml.pre to write; by default the name whose cuts the pre-tokenizer has. */
  pre?: string;
  /**
   * The model's embedding rows: ids past the tokenizer's own, up to it, are written as unused
   * "[PAD<id>]" tokens, as llama.cpp loads only a file with one token per embedding row.
   */
  vocabSize?: number;
}

/** tokenizer.ggml.* and tokenizer.chat_template* for a tokenizer.json and its config. */
export function ggufTokenizerMetadata(
  tokenizerJson: unknown,
  tokenizerConfig: Record<string, unknown>,
  options: TokenizerMetadataOptions = {},
): Record<string, GgufMeta> {
  const json = tokenizerJson as TokenizerJson;
  const fail = (problem: string): never => {
    throw new ModelLoadError("tokenizer.json", problem);
  };
  if (json.model?.type !== undefined && json.model.type !== "BPE") {
    fail(`model type ${json.model.type} cannot be written as GGUF here (BPE only)`);
  }
  const sentencePiece = json.model.byte_fallback === true;
  const tokens: string[] = [];
  for (const [text, id] of Object.entries(json.model.vocab)) tokens[id] = text;
  // Special tokens past the embedding's rows are left out, as the model has no row for them.
  const added = addedTokensWithin(json.added_tokens ?? [], options.vocabSize ?? Infinity);
  for (const t of added) tokens[t.id] = t.content;
  // Unused rows past the tokenizer's ids fill as gaps inside them do (below).
  if (options.vocabSize !== undefined && options.vocabSize > tokens.length) {
    tokens.length = options.vocabSize;
  }
  const unk = tokenText(tokenizerConfig.unk_token);
  const types: number[] = [];
  for (let i = 0; i < tokens.length; i++) {
    if (tokens[i] === undefined) {
      tokens[i] = `[PAD${i}]`;
      types[i] = TOKEN_TYPE.unused;
    } else if (sentencePiece && /^<0x[0-9A-F]{2}>$/.test(tokens[i])) types[i] = TOKEN_TYPE.byte;
    else types[i] = TOKEN_TYPE.normal;
  }
  for (const t of added) {
    types[t.id] = t.content === unk
      ? TOKEN_TYPE.unknown
      : t.special
      ? TOKEN_TYPE.control
      : TOKEN_TYPE.userDefined;
  }
  const merges = json.model.merges.map((m) => typeof m === "string" ? m : m.join(" "));

  const md: Record<string, GgufMeta> = {};
  if (sentencePiece) {
    md["tokenizer.ggml.model"] = meta.str("llama");
    md["tokenizer.ggml.scores"] = meta.f32s(mergeRankScores(tokens, merges));
    md["tokenizer.ggml.add_space_prefix"] = meta.bool(prependsSpace(json));
  } else {
    const pre = options.pre ?? preTokenizerName(json as unknown as Record<string, unknown>) ??
      fail(
        `its pre-tokenizer ${JSON.stringify(json.pre_tokenizer)} is none that tokenizer.ggml.pre ` +
          `names`,
      );
    md["tokenizer.ggml.model"] = meta.str("gpt2");
    md["tokenizer.ggml.pre"] = meta.str(pre);
    md["tokenizer.ggml.merges"] = meta.strs(merges);
  }
  md["tokenizer.ggml.tokens"] = meta.strs(tokens);
  md["tokenizer.ggml.token_type"] = meta.i32s(types);

  const idOf = (value: unknown) => {
    const text = tokenText(value);
    const id = text === null ? -1 : tokens.indexOf(text);
    return id < 0 ? null : id;
  };
  const ids = { bos: "bos_token", eos: "eos_token", unknown: "unk_token", padding: "pad_token" };
  for (const [key, configKey] of Object.entries(ids)) {
    const id = idOf(tokenizerConfig[configKey]);
    if (id !== null) md[`tokenizer.ggml.${key}_token_id`] = meta.u32(id);
  }
  const around = postProcessorAdds(json.post_processor ?? null);
  const bos = tokenText(tokenizerConfig.bos_token);
  const eos = tokenText(tokenizerConfig.eos_token);
  md["tokenizer.ggml.add_bos_token"] = meta.bool(
    typeof tokenizerConfig.add_bos_token === "boolean"
      ? tokenizerConfig.add_bos_token
      : bos !== null && around.first === bos,
  );
  md["tokenizer.ggml.add_eos_token"] = meta.bool(
    typeof tokenizerConfig.add_eos_token === "boolean"
      ? tokenizerConfig.add_eos_token
      : eos !== null && around.last === eos,
  );
  Object.assign(md, chatTemplateMetadata(tokenizerConfig.chat_template));
  return md;
}

/** Minus the rank of each piece's first merge; pieces no merge makes score below every merge. */
function mergeRankScores(tokens: string[], merges: string[]): number[] {
  const rank = new Map<string, number>();
  merges.forEach((m, i) => {
    const piece = m.replace(" ", "");
    if (!rank.has(piece)) rank.set(piece, i);
  });
  return tokens.map((t, id) => -(rank.get(t) ?? merges.length + id));
}

/** Whether the tokenizer puts "▁" before the text (Llama 2's normalizer or a Metaspace). */
function prependsSpace(json: TokenizerJson): boolean {
  const text = JSON.stringify([json.normalizer ?? null, json.pre_tokenizer ?? null]);
  return /"Prepend"|"prepend_scheme":"(first|always)"|"add_prefix_space":true/.test(text);
}

/** The special tokens a TemplateProcessing puts before and after a single sequence. */
function postProcessorAdds(
  post: Record<string, unknown> | null,
): { first: string | null; last: string | null } {
  if (post?.type !== "TemplateProcessing") return { first: null, last: null };
  const single = (post.single ?? []) as { SpecialToken?: { id: string } }[];
  return {
    first: single[0]?.SpecialToken?.id ?? null,
    last: single.length > 1 ? single.at(-1)?.SpecialToken?.id ?? null : null,
  };
}

/** tokenizer_config.json's chat_template: one string, or a list of {name, template}. */
function chatTemplateMetadata(value: unknown): Record<string, GgufMeta> {
  if (typeof value === "string") return { "tokenizer.chat_template": meta.str(value) };
  if (!Array.isArray(value)) return {};
  const md: Record<string, GgufMeta> = {};
  const names: string[] = [];
  for (const { name, template } of value as { name: string; template: string }[]) {
    if (name === "default") md["tokenizer.chat_template"] = meta.str(template);
    else {
      names.push(name);
      md[`tokenizer.chat_template.${name}`] = meta.str(template);
    }
  }
  if (names.length > 0) md["tokenizer.chat_templates"] = meta.strs(names);
  return md;
}

/** A special token as tokenizer_config.json gives it: text, or an object with content. */
function tokenText(value: unknown): string | null {
  if (typeof value === "string") return value;
  if (value !== null && typeof value === "object" && "content" in value) {
    const content = (value as { content: unknown }).content;
    return typeof content === "string" ? content : null;
  }
  return null;
}
