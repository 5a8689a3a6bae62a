// Compiled grammars by spec, least recently used evicted past a bound: compiling a schema takes
// tens of milliseconds and its token tables a good deal of WebAssembly memory, and clients tend to
// send the same few schemas again and again.
//
// A compiled grammar is a WebAssembly object that must be disposed. One that is being turned into
// a matcher is held; evicted while held, it is disposed once let go (a matcher keeps its own
// reference to what it needs, so the cache's copy is not needed after that).

export interface Disposable {
  dispose(): void;
}

export class CompileCache<T extends Disposable> {
  /** In recency order, oldest first; a compile still running is its promise. */
  readonly #entries = new Map<string, Promise<T>>();
  readonly #holds = new Map<Promise<T>, number>();
  readonly #evicted = new Set<Promise<T>>();
  hits = 0;
  misses = 0;

  constructor(private readonly capacity: number) {
    if (!(capacity >= 1)) throw new RangeError("a compile cache holds at least one grammar");
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The grammar cached under `key`, else `compile()`'s (cached unless it fails). */
  get(key: string, compile: () => Promise<T>): Promise<T> {
    let entry = this.#entries.get(key);
    if (entry) {
      this.hits++;
      this.#entries.delete(key); // re-inserted below: now the most recent
    } else {
      this.misses++;
      entry = compile();
      // A failed compile is not kept; it is reported to whoever asked.
      entry.catch(() => this.#entries.get(key) === entry && this.#entries.delete(key));
    }
    this.#entries.set(key, entry);
    while (this.#entries.size > this.capacity) {
      const [oldest, value] = this.#entries.entries().next().value!;
      this.#entries.delete(oldest);
      this.#evicted.add(value);
      this.#disposeIfFree(value);
    }
    return entry;
  }

  /** Keeps `entry` from being disposed until release(). */
  hold(entry: Promise<T>): void {
    this.#holds.set(entry, (this.#holds.get(entry) ?? 0) + 1);
  }

  release(entry: Promise<T>): void {
    const n = (this.#holds.get(entry) ?? 1) - 1;
    if (n > 0) this.#holds.set(entry, n);
    else this.#holds.delete(entry);
    this.#disposeIfFree(entry);
  }

  /** Disposes every grammar; the cache is empty after. */
  clear(): void {
    for (const entry of this.#entries.values()) this.#evicted.add(entry);
    this.#entries.clear();
    for (const entry of [...this.#evicted]) this.#disposeIfFree(entry);
  }

  #disposeIfFree(entry: Promise<T>): void {
    if (!this.#evicted.has(entry) || this.#holds.has(entry)) return;
    this.#evicted.delete(entry);
    entry.then((g) => g.dispose(), () => {});
  }
}
