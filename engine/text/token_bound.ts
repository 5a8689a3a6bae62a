// A lower bound on how many tokens a text becomes, from its UTF-8 length alone: no token covers
// more than `maxTokenBytes` bytes of the text it is cut from, so n bytes are at least
// ceil(n / maxTokenBytes) tokens. The server refuses a prompt whose bound is already past the
// context without tokenizing it (a megabyte takes the tokenizer about a second).
//
// It holds only where every byte of the input reaches some token and the text the tokens are cut
// from is no shorter than the input. So it is given only for
// - a BPE model that can spell any byte: byte-level (all 256 of GPT-2's byte characters in the
//   vocabulary) or SentencePiece with byte fallback (all 256 <0xNN> tokens). Otherwise an
//   unknown character is dropped, or a run of them is one <unk> (fuse_unk);
// - a normalizer that only lengthens text: none, Prepend, or Replace of a string by one at least
//   as long (Llama 2's " " → "▁"). Unicode normal forms shrink text (NFC maps the Kelvin sign,
//   3 bytes, to "K"), and so do lowercasing ("K" again), stripping, accent removal, regex
//   replacements and SentencePiece's precompiled charmaps: no bound for those;
// - a pre-tokenizer that keeps every character: ByteLevel, Metaspace, Split keeping what it
//   splits on, Digits, Punctuation. Whitespace-style splitters drop the spaces: no bound;
// - no added token that strips the spaces beside it (lstrip/rstrip), and no tokenizer_config.json
//   option that collapses spaces (remove_space) or lowercases and strips accents.
// A token's bytes are counted in the text as the model sees it, never fewer than it covers of
// the input: GPT-2's byte characters are a byte each, <0xNN> one byte, anything else (a
// SentencePiece piece, where "▁" is 3 bytes for a 1-byte space; added and special tokens) its
// UTF-8 length.

import { gpt2ByteAlphabet } from "./token_bytes.ts";

type Json = Record<string, unknown>;

/** The most bytes of text one token covers, or null where no such bound holds (see above). */
export function maxTokenBytes(tokenizerJson: unknown, tokenizerConfig: Json): number | null {
  const json = (tokenizerJson ?? {}) as Json;
  const model = (json.model ?? {}) as Json;
  if (model.type !== "BPE" || model.vocab === null || typeof model.vocab !== "object") return null;
  if (tokenizerConfig.remove_space === true) return null;
  if (tokenizerConfig.do_lowercase_and_remove_accent === true) return null;
  if (!lengthens(json.normalizer ?? null) || !keepsText(json.pre_tokenizer ?? null)) return null;
  const added = (json.added_tokens ?? []) as {
    content?: unknown;
    lstrip?: unknown;
    rstrip?: unknown;
  }[];
  if (added.some((t) => t.lstrip === true || t.rstrip === true)) return null;

  const vocab = model.vocab as Record<string, unknown>;
  const byteLevel = hasType(json.pre_tokenizer, "ByteLevel");
  const alphabet = new Set(gpt2ByteAlphabet());
  const byteToken = (b: number) => `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`;
  const spellsEveryByte = byteLevel
    ? [...alphabet].every((ch) => ch in vocab)
    : model.byte_fallback === true && Array.from({ length: 256 }, (_, b) => byteToken(b))
      .every((t) => t in vocab);
  if (!spellsEveryByte) return null;

  const bytesOf = (token: string): number => {
    if (!byteLevel && model.byte_fallback === true && /^<0x[0-9A-F]{2}>$/.test(token)) return 1;
    let n = 0;
    for (const ch of token) n += byteLevel && alphabet.has(ch) ? 1 : utf8Length(ch);
    return n;
  };
  let most = 1;
  for (const token of Object.keys(vocab)) most = Math.max(most, bytesOf(token));
  for (const t of added) {
    if (typeof t.content === "string") most = Math.max(most, utf8Length(t.content));
  }
  return most;
}

/** The length of `text` in UTF-8 as TextEncoder writes it (a lone surrogate is U+FFFD, 3 bytes). */
export function utf8Length(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c < 0xdc00 && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next < 0xe000) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/** Whether a normalizer can only lengthen text (see above). */
function lengthens(n: unknown): boolean {
  if (n === null) return true;
  const { type, normalizers, pattern, content } = n as Json;
  if (type === "Sequence") return Array.isArray(normalizers) && normalizers.every(lengthens);
  if (type === "Prepend") return true;
  if (type === "Replace") return replacesWithLonger(pattern, content);
  return false;
}

/** Whether a pre-tokenizer keeps every character of its input (see above). */
function keepsText(p: unknown): boolean {
  if (p === null) return true;
  const { type, pretokenizers, behavior, invert, pattern, content, replacement } = p as Json;
  switch (type) {
    case "Sequence":
      return Array.isArray(pretokenizers) && pretokenizers.every(keepsText);
    case "ByteLevel":
    case "Digits":
      return true;
    case "Metaspace":
      return typeof replacement !== "string" || utf8Length(replacement) >= 1;
    case "Split":
    case "Punctuation":
      return invert !== true && String(behavior ?? "").toLowerCase() !== "removed";
    case "Replace":
      return replacesWithLonger(pattern, content);
    default:
      return false;
  }
}

function replacesWithLonger(pattern: unknown, content: unknown): boolean {
  const from = (pattern as Json | null)?.String;
  return typeof from === "string" && from.length > 0 && typeof content === "string" &&
    utf8Length(content) >= utf8Length(from);
}

function hasType(p: unknown, type: string): boolean {
  if (p === null || typeof p !== "object") return false;
  const { type: t, pretokenizers } = p as Json;
  return t === type ||
    (Array.isArray(pretokenizers) && pretokenizers.some((q) => hasType(q, type)));
}
