// The bytes a token stands for, as far as the stream decoder needs them: to tell whether the
// tokens so far end in the middle of a UTF-8 character. Only two tokenizer families have tokens
// that hold part of a character, and both say so in tokenizer.json's decoder:
// - byte-level BPE (GPT-2, Llama 3, Qwen; "ByteLevel"): every token spells bytes in GPT-2's byte
//   alphabet, one character per byte;
// - SentencePiece with byte fallback (Llama 2, Mistral; "ByteFallback"): tokens <0x00>…<0xFF>
//   are single bytes, every other token is whole characters.
// Other tokenizers only have whole characters, so they never end mid-character. Added tokens
// (specials included) are always whole text.

import { incompleteUtf8Tail } from "./utf8_tail.ts";

/** How a vocabulary's token strings spell text (see above). */
export type TokenFamily = "byte-level" | "byte-fallback" | "whole-characters";

const utf8 = new TextEncoder();

export class TokenBytes {
  readonly #family: TokenFamily;
  readonly #tokenText: (id: number) => string | undefined;
  readonly #addedIds: Set<number>;
  readonly #byteOfChar: Map<string, number>;

  /**
   * @param decoder tokenizer.json's `decoder` section.
   * @param tokenText the vocabulary's string for an id.
   * @param addedIds ids of tokenizer.json's `added_tokens` (their text is never byte-encoded).
   */
  constructor(
    decoder: unknown,
    tokenText: (id: number) => string | undefined,
    addedIds: Iterable<number>,
  ) {
    const types = decoderTypes(decoder);
    this.#family = types.has("ByteLevel")
      ? "byte-level"
      : types.has("ByteFallback")
      ? "byte-fallback"
      : "whole-characters";
    this.#tokenText = tokenText;
    this.#addedIds = new Set(addedIds);
    this.#byteOfChar = new Map(gpt2ByteAlphabet().map((ch, byte) => [ch, byte]));
  }

  get family(): TokenFamily {
    return this.#family;
  }

  /** The bytes `id` stands for (whole characters as UTF-8 where it is not byte-encoded). */
  bytesOf(id: number): Uint8Array {
    const text = this.#tokenText(id) ?? "";
    if (this.#addedIds.has(id)) return utf8.encode(text);
    if (this.#family === "byte-level") {
      const out: number[] = [];
      for (const ch of text) {
        const byte = this.#byteOfChar.get(ch);
        if (byte !== undefined) out.push(byte);
        else out.push(...utf8.encode(ch)); // not in the alphabet: taken as the text it is
      }
      return Uint8Array.from(out);
    }
    if (this.#family === "byte-fallback") {
      const m = /^<0x([0-9A-Fa-f]{2})>$/.exec(text);
      if (m) return Uint8Array.of(parseInt(m[1], 16));
    }
    return utf8.encode(text);
  }

  /**
   * How many bytes at the end of `ids` (0–3) begin a character that later tokens could still
   * complete. `skip` leaves out ids the decoder drops (special tokens under skipSpecial).
   */
  incompleteTail(ids: readonly number[], skip?: (id: number) => boolean): number {
    if (this.#family === "whole-characters") return 0;
    const tail: number[] = [];
    for (let i = ids.length - 1; i >= 0 && tail.length < 3; i--) {
      if (skip?.(ids[i])) continue;
      tail.unshift(...this.bytesOf(ids[i]));
    }
    return incompleteUtf8Tail(tail);
  }
}

/** The `type`s of a decoder and of every decoder nested in a Sequence. */
function decoderTypes(decoder: unknown): Set<string> {
  const types = new Set<string>();
  const visit = (d: unknown) => {
    if (d === null || typeof d !== "object") return;
    const { type, decoders } = d as { type?: unknown; decoders?: unknown };
    if (typeof type === "string") types.add(type);
    if (Array.isArray(decoders)) decoders.forEach(visit);
  };
  visit(decoder);
  return types;
}

/**
 * GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the rest are shifted to
 * code points from 256 up, so each byte is one visible character ("Ġ" is the space).
 */
export function gpt2ByteAlphabet(): string[] {
  const chars: string[] = new Array(256);
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    chars[b] = String.fromCodePoint(printable ? b : next++);
  }
  return chars;
}
