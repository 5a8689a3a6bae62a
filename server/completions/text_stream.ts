// Turns generated token events into text deltas: incremental detokenization and stop strings (text
// that could still become a stop string is held back). Each delta carries the tokens it completes,
// so their logprob entries go out with their text.

import type { TokenEvent } from "../../runtime/service.ts";
import { StreamDecoder, type Tokenizer } from "../../runtime/service.ts";

export interface TextPiece {
  text: string;
  /** The tokens whose text this piece completes, with their logprobs. */
  tokens: TokenEvent[];
}

export class TextStream {
  private decoder: StreamDecoder;
  private held = "";
  private heldTokens: TokenEvent[] = [];
  private maxStop: number;
  /** True once a stop string matched; later tokens are ignored. */
  stopped = false;
  /** The stop string that matched (the earliest in the text), once one has. */
  matched: string | null = null;

  constructor(tok: Tokenizer, private stops: string[]) {
    this.decoder = new StreamDecoder(tok);
    this.maxStop = Math.max(0, ...stops.map((s) => s.length));
  }

  push(ev: TokenEvent): TextPiece {
    if (this.stopped) return { text: "", tokens: [] };
    this.held += this.decoder.push(ev.id);
    this.heldTokens.push(ev);
    return this.release(false);
  }

  /** Everything still held, at the end of generation. */
  flush(): TextPiece {
    if (this.stopped) return { text: "", tokens: [] };
    this.held += this.decoder.flush();
    return this.release(true);
  }

  private release(final: boolean): TextPiece {
    let cut = -1;
    for (const s of this.stops) {
      const at = this.held.indexOf(s);
      if (at >= 0 && (cut < 0 || at < cut)) {
        cut = at;
        this.matched = s;
      }
    }
    if (cut >= 0) {
      this.stopped = true;
      return this.take(cut, this.held.length);
    }
    // Hold back a tail that is a prefix of some stop string, so it is never sent and then retracted.
    let keep = 0;
    if (!final) {
      for (let n = Math.min(this.maxStop - 1, this.held.length); n > 0; n--) {
        const tail = this.held.slice(-n);
        if (this.stops.some((s) => s.startsWith(tail))) {
          keep = n;
          break;
        }
      }
    }
    return this.take(this.held.length - keep, this.held.length - keep);
  }

  /** Emits held[0, emitEnd) and drops held[0, dropEnd). Tokens go out with the first text after them. */
  private take(emitEnd: number, dropEnd: number): TextPiece {
    const text = this.held.slice(0, emitEnd);
    this.held = this.held.slice(dropEnd);
    if (text.length === 0 && !this.stopped && this.held.length > 0) return { text: "", tokens: [] };
    const tokens = this.heldTokens;
    this.heldTokens = [];
    return { text, tokens };
  }
}
