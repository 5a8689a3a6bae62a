// Rebuilds the Hugging Face tokenizer files (tokenizer.json and tokenizer_config.json) from a GGUF
// file's tokenizer.* metadata, so the one Tokenizer class (@huggingface/tokenizers) serves GGUF
// models too.
//
// Two vocabulary kinds, as llama.cpp names them:
// - "llama": SentencePiece BPE (Llama 2, Mistral, TinyLlama): pieces with scores, "▁" for spaces,
//   byte-fallback tokens <0x00>…<0xFF>. SentencePiece merges the adjacent pair whose joined piece
//   scores highest; a BPE whose merges are every split of every piece, ranked by the joined piece's
//   score, does the same (transformers' LlamaConverter builds Llama's tokenizer.json so).
// - "gpt2": byte-level BPE (Llama 3, Qwen, SmolLM): tokens and merges as they are; the
//   pre-tokenizer is named by tokenizer.ggml.pre (gguf_pre_tokenizers.ts).
//
// Token types decide what matches as a whole string before the model sees the text: control and
// unknown tokens (special), user-defined ones (not special, as Qwen's <tool_call>); normal, byte
// and unused tokens are the model's vocabulary. The stop ids are llama.cpp's end-of-generation
// set: eos, eot and eom ids, and the tokens that end a turn by their text (Qwen ends on both
// <|im_end|> and <|endoftext|>, Llama 3 on <|eot_id|> and <|end_of_text|>); they travel as
// generation_config.json's eos_token_id would.

import { ModelLoadError } from "../model/errors.ts";
import type { GgufFile, GgufValue } from "./gguf.ts";
import { preTokenizerKind, SUPPORTED_PRE_TOKENIZERS } from "./gguf_pre_tokenizers.ts";
import { addedToken, bpeModel, tokenizerFile } from "./tokenizer_json.ts";

export interface TokenizerFiles {
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
  /** generation_config.json's part: the end-of-generation ids. */
  generationConfig: { eos_token_id: number[] };
}

/** Tokens that end a turn by their text, whatever the metadata's ids say (as llama.cpp finds them). */
const END_OF_TURN_TEXTS = new Set([
  "<|eot_id|>",
  "<|eom_id|>",
  "<|im_end|>",
  "<|endoftext|>",
  "<|end_of_text|>",
  "<|end|>",
  "<end_of_turn>",
  "<EOT>",
  "<｜end▁of▁sentence｜>",
]);

/** tokenizer.ggml.token_type values (llama.cpp's llama_token_type). */
const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, userDefined: 4, unused: 5, byte: 6 };

export function ggufTokenizerFiles(gguf: GgufFile): TokenizerFiles {
  const fail = (problem: string): never => {
    throw new ModelLoadError(gguf.path, problem);
  };
  const md = gguf.metadata;
  const model = md["tokenizer.ggml.model"];
  const tokens = stringList(md, "tokenizer.ggml.tokens") ??
    fail("has no tokenizer (metadata tokenizer.ggml.tokens is missing)");
  const types = numberList(md, "tokenizer.ggml.token_type") ?? [];
  const typeOf = (id: number) => types[id] ?? TOKEN_TYPE.normal;
  const id = (key: string) => {
    const v = md[`tokenizer.ggml.${key}`];
    return typeof v === "number" || typeof v === "bigint" ? Number(v) : null;
  };
  const bos = id("bos_token_id");
  const eos = id("eos_token_id");
  const unk = id("unknown_token_id") ??
    tokens.findIndex((_, i) => typeOf(i) === TOKEN_TYPE.unknown);
  const pad = id("padding_token_id");

  // No prototype: "constructor" and "__proto__" are tokens of code-trained vocabularies.
  const vocab: Record<string, number> = Object.create(null);
  tokens.forEach((t, i) => {
    if (vocab[t] === undefined) vocab[t] = i;
  });
  // Control and user-defined tokens match as whole strings before the model sees the text.
  const addedTokens = tokens.flatMap((content, i) => {
    const type = typeOf(i);
    const special = type === TOKEN_TYPE.control || type === TOKEN_TYPE.unknown;
    if (!special && type !== TOKEN_TYPE.userDefined) return [];
    return [addedToken(i, content, special)];
  });

  let tokenizerJson: Record<string, unknown>;
  let addBos: boolean;
  if (model === "llama") {
    const scores = numberList(md, "tokenizer.ggml.scores") ??
      fail("tokenizer.ggml.scores is missing (a SentencePiece vocabulary needs them)");
    const prefixSpace = md["tokenizer.ggml.add_space_prefix"] !== false;
    addBos = md["tokenizer.ggml.add_bos_token"] !== false;
    // As SentencePiece and llama.cpp: "▁" before every run of text (also one that starts with a
    // space, and after each special token), then spaces as "▁". A Metaspace pre-tokenizer would
    // skip the prefix where the text already starts with a space.
    const replace = { type: "Replace", pattern: { String: " " }, content: "▁" };
    tokenizerJson = {
      normalizer: prefixSpace
        ? { type: "Sequence", normalizers: [{ type: "Prepend", prepend: "▁" }, replace] }
        : replace,
      pre_tokenizer: null,
      decoder: {
        type: "Sequence",
        decoders: [
          { type: "Replace", pattern: { String: "▁" }, content: " " },
          { type: "ByteFallback" },
          { type: "Fuse" },
          ...(prefixSpace ? [{ type: "Strip", content: " ", start: 1, stop: 0 }] : []),
        ],
      },
      model: bpeModel({
        vocab,
        merges: sentencePieceMerges(tokens, scores, typeOf),
        unkToken: unk >= 0 ? tokens[unk] : null,
        fuseUnk: true,
        byteFallback: true,
        ignoreMerges: false,
      }),
    };
  } else if (model === "gpt2") {
    const merges = stringList(md, "tokenizer.ggml.merges") ??
      fail("tokenizer.ggml.merges is missing (a byte-level BPE vocabulary needs them)");
    const preValue = md["tokenizer.ggml.pre"];
    const pre = preValue === undefined ? undefined : String(preValue);
    const kind = preTokenizerKind(pre) ??
      fail(
        `tokenizer.ggml.pre "${pre}" is not a pre-tokenizer Sluice knows (it knows: ${
          SUPPORTED_PRE_TOKENIZERS.join(", ")
        }); its words would be cut wrongly`,
      );
    const addBosKey = md["tokenizer.ggml.add_bos_token"];
    addBos = typeof addBosKey === "boolean" ? addBosKey : kind.addBosByDefault;
    tokenizerJson = {
      normalizer: kind.normalizer,
      pre_tokenizer: kind.preTokenizer,
      decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
      model: bpeModel({
        vocab,
        // The pair's halves part at the first space after the first character, as llama.cpp reads
        // them (a half may be a lone space where the vocabulary has one); a line without a pair
        // merges nothing.
        merges: merges.flatMap((m) => {
          const at = m.indexOf(" ", 1);
          return at < 0 ? [] : [[m.slice(0, at), m.slice(at + 1)]];
        }),
        unkToken: null,
        fuseUnk: false,
        byteFallback: false,
        ignoreMerges: kind.ignoreMerges,
      }),
    };
  } else {
    return fail(
      `tokenizer.ggml.model ${JSON.stringify(model ?? null)} is not supported (llama, gpt2)`,
    );
  }
  const addEos = md["tokenizer.ggml.add_eos_token"] === true;
  tokenizerJson = tokenizerFile(addedTokens, {
    ...tokenizerJson,
    post_processor: postProcessor(
      addBos && bos !== null ? tokens[bos] : null,
      addEos && eos !== null ? tokens[eos] : null,
      vocab,
    ),
  });

  const text = (i: number | null) => (i !== null && i >= 0 && i < tokens.length ? tokens[i] : null);
  const chatTemplate = chatTemplates(md);
  const tokenizerConfig: Record<string, unknown> = {
    tokenizer_class: model === "llama" ? "LlamaTokenizer" : "GPT2Tokenizer",
    add_bos_token: addBos,
    add_eos_token: addEos,
    bos_token: text(bos),
    eos_token: text(eos),
    unk_token: text(unk),
    pad_token: text(pad),
    clean_up_tokenization_spaces: false,
    ...(chatTemplate !== null ? { chat_template: chatTemplate } : {}),
  };
  const stops = new Set<number>();
  for (const key of ["eos", "eot", "eom"]) {
    const stop = id(`${key}_token_id`);
    if (stop !== null && stop >= 0 && stop < tokens.length) stops.add(stop);
  }
  tokens.forEach((t, i) => {
    if (END_OF_TURN_TEXTS.has(t)) stops.add(i);
  });
  const generationConfig = { eos_token_id: [...stops].sort((a, b) => a - b) };
  return { tokenizerJson, tokenizerConfig, generationConfig };
}

/**
 * tokenizer.chat_template, and the named ones llama.cpp's converter writes beside it
 * (tokenizer.chat_templates lists the names, tokenizer.chat_template.NAME holds each) in
 * tokenizer_config.json's list form, so "tool_use" is picked when tools are given, as there.
 */
function chatTemplates(
  md: Record<string, GgufValue>,
): string | { name: string; template: string }[] | null {
  const main = md["tokenizer.chat_template"];
  const names = stringList(md, "tokenizer.chat_templates") ?? [];
  const named = names.flatMap((name) => {
    const template = md[`tokenizer.chat_template.${name}`];
    return typeof template === "string" ? [{ name, template }] : [];
  });
  if (named.length === 0) return typeof main === "string" && main !== "" ? main : null;
  return typeof main === "string" ? [{ name: "default", template: main }, ...named] : named;
}

/**
 * Every split of every normal or user-defined piece into two such pieces, ranked by the joined
 * piece's score (highest first), then by the halves' ids: what SentencePiece's BPE would merge.
 * User-defined pieces take part as llama.cpp's SentencePiece tokenizer lets them (it looks a pair
 * up in the whole vocabulary): Gemma's runs of spaces ("▁▁", "▁▁▁▁") are user-defined, and
 * without them "    if" would be cut "▁", "▁", "▁", "▁if" where tokenizer.json cuts "▁▁▁▁", "if".
 */
function sentencePieceMerges(
  tokens: string[],
  scores: number[],
  typeOf: (id: number) => number,
): [string, string][] {
  const normal = new Map<string, number>(); // mergeable pieces' ids
  tokens.forEach((t, i) => {
    const type = typeOf(i);
    const mergeable = type === TOKEN_TYPE.normal || type === TOKEN_TYPE.userDefined;
    if (mergeable && !normal.has(t)) normal.set(t, i);
  });
  const merges: { left: number; right: number; score: number; pair: [string, string] }[] = [];
  for (const [piece, id] of normal) {
    const chars = Array.from(piece);
    for (let i = 1; i < chars.length; i++) {
      const a = chars.slice(0, i).join("");
      const b = chars.slice(i).join("");
      const left = normal.get(a);
      const right = normal.get(b);
      if (left !== undefined && right !== undefined) {
        merges.push({ left, right, score: scores[id] ?? 0, pair: [a, b] });
      }
    }
  }
  merges.sort((x, y) => y.score - x.score || x.left - y.left || x.right - y.right);
  return merges.map((m) => m.pair);
}

/** BOS/EOS around each sequence, as transformers writes them for Llama. */
function postProcessor(
  bos: string | null,
  eos: string | null,
  vocab: Record<string, number>,
): Record<string, unknown> | null {
  if (bos === null && eos === null) return null;
  const special = (
    t: string | null,
  ) => (t === null ? [] : [{ SpecialToken: { id: t, type_id: 0 } }]);
  const specialTokens: Record<string, unknown> = {};
  for (const t of [bos, eos]) {
    if (t !== null) specialTokens[t] = { id: t, ids: [vocab[t]], tokens: [t] };
  }
  return {
    type: "TemplateProcessing",
    single: [...special(bos), { Sequence: { id: "A", type_id: 0 } }, ...special(eos)],
    pair: [
      ...special(bos),
      { Sequence: { id: "A", type_id: 0 } },
      ...special(eos),
      ...special(bos),
      { Sequence: { id: "B", type_id: 1 } },
      ...special(eos),
    ],
    special_tokens: specialTokens,
  };
}

function stringList(md: Record<string, GgufValue>, key: string): string[] | null {
  const v = md[key];
  return Array.isArray(v) && v.every((x) => typeof x === "string") ? v as string[] : null;
}

function numberList(md: Record<string, GgufValue>, key: string): number[] | null {
  const v = md[key];
  return Array.isArray(v) ? v.map(Number) : null;
}
