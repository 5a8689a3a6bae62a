// Hands items from a producer that pushes (a playback's emit callback) to a consumer that pulls (an
// async iterator), one at a time: each put() resolves once its item is taken, so a slow reader
// slows the playback as a slow SSE write did. A reader that stops early (return()) releases the
// producer: its later puts resolve at once and their items are dropped.

export class Handoff<T> implements AsyncIterable<T> {
  #items: { item: T; taken: () => void }[] = [];
  #wake: (() => void) | null = null;
  #closed = false;
  #dropped = false;

  /** Resolves when the consumer has taken `item` (or has stopped reading). */
  put(item: T): Promise<void> {
    if (this.#dropped || this.#closed) return Promise.resolve();
    return new Promise((taken) => {
      this.#items.push({ item, taken });
      this.#wakeReader();
    });
  }

  /** No more items: the iterator ends once it has taken those already put. */
  close(): void {
    this.#closed = true;
    this.#wakeReader();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    try {
      for (;;) {
        const next = this.#items.shift();
        if (next) {
          next.taken();
          yield next.item;
        } else if (this.#closed) {
          return;
        } else {
          await new Promise<void>((wake) => this.#wake = wake);
        }
      }
    } finally {
      this.#dropped = true;
      for (const { taken } of this.#items.splice(0)) taken();
    }
  }

  #wakeReader(): void {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }
}
