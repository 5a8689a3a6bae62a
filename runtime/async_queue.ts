// An unbounded single-consumer queue exposed as an async iterable: the engine pushes, a client reads.

export class AsyncQueue<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private waiter: (() => void) | null = null;
  private closed = false;
  private failure: unknown = null;

  push(item: T): void {
    if (this.closed) return;
    this.items.push(item);
    this.wake();
  }

  /** Ends the stream after the items already queued. */
  close(): void {
    this.closed = true;
    this.wake();
  }

  /** Ends the stream with an error, raised to the reader after the queued items. */
  fail(error: unknown): void {
    this.failure = error;
    this.close();
  }

  get size(): number {
    return this.items.length;
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    while (true) {
      if (this.items.length > 0) {
        yield this.items.shift()!;
        continue;
      }
      if (this.closed) {
        if (this.failure) throw this.failure;
        return;
      }
      await new Promise<void>((resolve) => this.waiter = resolve);
    }
  }
}
