// One request's place in its grammar: xgrammar's matcher, advanced by every token the request is
// given, and the mask of the ids allowed next. A mask depends on the token before it, so it is
// computed when that token is delivered (xgrammar's call is asynchronous), and the request's next
// sample waits for it; the scheduler never pipelines a constrained request.
//
// Each new mask is also read for two shortcuts: a grammar that allows nothing but a stop id is
// complete (the request ends without a step to sample the stop), and one that allows exactly one
// id forces it (jump-forward: the request takes it without sampling, as the model would have).
// The matcher is WebAssembly memory: dispose() when the request ends, however it ends.

import type { GrammarMatcher } from "@mlc-ai/web-xgrammar";

export class RequestGrammar {
  /** Ids allowed at the next sample (bit id % 32 of word id >> 5); null while it is computed. */
  mask: Uint32Array | null = null;
  /** With the mask: the one id it allows, when it allows one and no stop (else null). */
  forced: number | null = null;
  /** With the mask: it allows only stop ids. */
  complete = false;
  /** Why the grammar cannot go on (its matcher could not be made, or refused a token). */
  error: string | null = null;
  #matcher: GrammarMatcher | null = null;
  #disposed = false;
  readonly #stopIds: ReadonlySet<number>;
  readonly #listeners: (() => void)[] = [];

  /** @param stopIds the model's stop ids, which the grammar allows once it is complete. */
  constructor(matcher: Promise<GrammarMatcher>, stopIds: Iterable<number>) {
    this.#stopIds = new Set(stopIds);
    matcher.then(
      (m) => {
        if (this.#disposed) return m.dispose();
        this.#matcher = m;
        this.#computeMask();
      },
      (e) => this.#fail(`the grammar's matcher could not be made: ${(e as Error).message}`),
    );
  }

  /** Calls `fn` whenever a mask is ready, or an error is. */
  listen(fn: () => void): void {
    this.#listeners.push(fn);
  }

  /** A stop id of the grammar (the model's EOS): the request ends there. */
  isStop(id: number): boolean {
    return this.#stopIds.has(id);
  }

  /** The request was given `id` (sampled under the mask, or forced); the next mask follows. */
  accept(id: number): void {
    if (this.#disposed || this.#matcher === null) return;
    this.mask = null;
    this.forced = null;
    if (!this.#matcher.acceptToken(id)) {
      this.#fail(`the grammar refused token ${id}`);
      return;
    }
    this.#computeMask();
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.mask = null;
    this.#matcher?.dispose();
    this.#matcher = null;
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  #computeMask(): void {
    const matcher = this.#matcher!;
    matcher.getNextTokenBitmask().then((words) => {
      if (this.#disposed || this.#matcher !== matcher) return;
      const mask = new Uint32Array(words.buffer, words.byteOffset, words.length);
      let allowed = 0;
      let only = -1;
      let stops = 0;
      for (let w = 0; w < mask.length && allowed < 2; w++) {
        for (let bits = mask[w]; bits !== 0 && allowed < 2; bits &= bits - 1) {
          const id = w * 32 + 31 - Math.clz32(bits & -bits);
          if (this.#stopIds.has(id)) stops++;
          else if (++allowed === 1) only = id;
        }
      }
      this.mask = mask;
      this.complete = allowed === 0;
      this.forced = allowed === 1 && stops === 0 ? only : null;
      this.#tell();
    }, (e) => this.#fail(`the grammar's mask could not be computed: ${(e as Error).message}`));
  }

  #fail(message: string): void {
    if (this.#disposed) return;
    this.error = message;
    this.#tell();
  }

  #tell(): void {
    for (const fn of this.#listeners) fn();
  }
}
