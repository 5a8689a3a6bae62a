// Turns ids arriving one at a time into text deltas that never split a character and never hold
// text back for longer than a character needs: text goes out with the token that completes it.

/** What the stream decoder needs of a tokenizer (text/tokenizer.ts's Tokenizer is one). */
export interface Detokenizer {
  decode(ids: readonly number[], opts: { skipSpecial?: boolean }): string;
  /** Bytes (0–3) at the end of `ids` that begin a character later ids could still complete. */
  incompleteUtf8Tail(ids: readonly number[], opts: { skipSpecial?: boolean }): number;
}

/**
 * Incremental detokenizer. Each push decodes a short window (the previous delta's tokens plus the
 * new ones) and emits what extends the previous text. The window matters for tokenizers whose
 * decoding of a token depends on its neighbours (leading-space handling); concatenating every
 * delta and flush() gives decode(all ids).
 *
 * Only an incomplete UTF-8 character at the end (at most 3 bytes that a later token can still
 * complete) is held back. Bytes that can never form a character are already U+FFFD in the
 * decoded text and go out at once, as does a real U+FFFD the model wrote.
 */
export class StreamDecoder {
  readonly #tokenizer: Detokenizer;
  readonly #skipSpecial: boolean;
  readonly #ids: number[] = [];
  /** Start of the window: the first token of the last emitted delta. */
  #prefixOffset = 0;
  /** Tokens before this index have been emitted in full. */
  #readOffset = 0;
  /** Characters of the tokens from #readOffset on already emitted (those before a held tail). */
  #emittedUnread = 0;

  constructor(tokenizer: Detokenizer, { skipSpecial = false }: { skipSpecial?: boolean } = {}) {
    this.#tokenizer = tokenizer;
    this.#skipSpecial = skipSpecial;
  }

  /** Adds one id; returns the newly stable text ("" while a character is incomplete). */
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
    // An incomplete character decodes to one U+FFFD at the very end: everything before it is
    // final already (even U+FFFDs for broken bytes before it), only that one must wait.
    const held = !final &&
      this.#tokenizer.incompleteUtf8Tail(this.#ids.slice(this.#readOffset), opts) > 0;
    const end = held && full.endsWith("\uFFFD") ? full.length - 1 : full.length;
    const start = prefix.length + this.#emittedUnread;
    const delta = end > start ? full.slice(start, end) : "";
    if (held) {
      this.#emittedUnread += delta.length;
    } else if (delta.length > 0) {
      this.#prefixOffset = this.#readOffset;
      this.#readOffset = this.#ids.length;
      this.#emittedUnread = 0;
    }
    return delta;
  }
}
