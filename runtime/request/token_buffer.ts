// The token-deposit pacer (DESIGN.md "The pacer"; OrbitFlow's Token Deposit, TokenFlow's client
// playout buffer). The engine deposits tokens as they are read back, usually in bursts; the pacer
// hands them to the stream writer one every 1000/rate ms, so a reader sees a steady stream while
// its request is paused, and the scheduler can read how many seconds of playout each buffer holds.
//
// Release rule (times in ms on the injected clock):
//   scheduled_0 = when token 0 is available (deposited and asked for);
//   scheduled_i = max(scheduled_{i-1} + 1000/rate, when token i is available).
// A token is "available" once it is deposited and the consumer is waiting for it. With a consumer
// that keeps pulling, this is exactly max(previous release + interval, deposit time of i): a stall
// restarts the cadence instead of bursting to catch up. A slow consumer (network backpressure)
// delays releases too, so the tokens it has not taken stay counted in occupancy().
//
// Stalls: a stall is time during which the next release was due but the buffer was empty while
// the producer had not ended. Time before the first release is TTFT, not a stall. Unpaced pacers
// have no due times, so they never stall.

/** Time source and timers, injected so tests can run the pacer on fake time. */
export interface PacerClock {
  /** Milliseconds on a monotonic clock. */
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The process clock. Looks globals up at call time, so installed fake timers apply to it. */
export const systemClock: PacerClock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as number),
};

/** Slowest and fastest reading rates (tokens/s) a request may ask for; the schema uses these too. */
export const MIN_READING_RATE = 0.1;
export const MAX_READING_RATE = 10_000;

/** Timers take at most a signed 32-bit delay; a longer one fires at once (and would spin). */
const MAX_TIMER_MS = 2 ** 31 - 1;

export interface PacerOptions {
  /** Reading rate in tokens per second; undefined or 0 releases every token at once. */
  rate?: number;
  clock?: PacerClock;
}

export interface PacerOccupancy {
  /** Deposited tokens not yet released to the consumer. */
  tokens: number;
  /**
   * Seconds of playout those tokens cover: tokens / rate. Unpaced pacers report 0: their reader
   * takes tokens as fast as they come, so they bank no playout margin and a buffer-aware scheduler
   * must treat them as always urgent (Infinity would let it starve them).
   */
  seconds: number;
}

export interface PacerStats {
  released: number;
  deposited: number;
  /** Total stall time in ms, including a stall still in progress at the time of the call. */
  stallMs: number;
  /** Number of distinct stalls, including one in progress. */
  stalls: number;
  /** Clock time of the first deposit (the server's first token), or null before it. */
  firstDepositAt: number | null;
  /** Clock time of the first release, or null before it. */
  firstReleaseAt: number | null;
  /** Clock time of the latest release, or null before the first. */
  lastReleaseAt: number | null;
}

type Waiter<T> = (result: IteratorResult<T, undefined>) => void;

/**
 * A FIFO of tokens released at a reading rate. One producer (deposit/end/abort), one consumer
 * (async iteration). Never loses, duplicates or reorders a token; abort() is the only way tokens
 * are dropped.
 */
export class TokenPacer<T> implements AsyncIterable<T> {
  readonly rate: number;
  readonly #intervalMs: number;
  readonly #clock: PacerClock;

  // Unreleased tokens are #items[#head..]; the prefix is compacted away now and then so a long
  // stream neither shifts on every release (O(n)) nor keeps every released token alive.
  #items: T[] = [];
  #head = 0;
  #waiters: Waiter<T>[] = [];
  #timer: unknown = null;
  #ended = false;
  #aborted = false;
  #iterated = false;

  /** Scheduled time of the next release; -Infinity until the first one (released at once). */
  #nextDueAt = -Infinity;
  /** When the head token and a waiting consumer were both present; null while either is missing. */
  #readyAt: number | null = null;

  #released = 0;
  #deposited = 0;
  /** Per deposited token: tokens already buffered (deposited, not released) when it came in. */
  #depositOccupancy: number[] = [];
  #stallMs = 0;
  #stalls = 0;
  #firstDepositAt: number | null = null;
  #firstReleaseAt: number | null = null;
  #lastReleaseAt: number | null = null;
  #resolveClosed!: () => void;
  /** Resolves once the stream has ended for the consumer: drained after end(), or aborted. */
  readonly closed: Promise<void> = new Promise((r) => this.#resolveClosed = r);

  constructor(options: PacerOptions = {}) {
    const rate = options.rate ?? 0;
    if (rate !== 0 && !(rate >= MIN_READING_RATE && rate <= MAX_READING_RATE)) {
      throw new RangeError(
        `reading rate must be 0 (unpaced) or ${MIN_READING_RATE}..${MAX_READING_RATE} tokens/s, got ${rate}`,
      );
    }
    this.rate = rate;
    this.#intervalMs = rate > 0 ? 1000 / rate : 0;
    this.#clock = options.clock ?? systemClock;
  }

  get paced(): boolean {
    return this.rate > 0;
  }

  /** True once the stream has ended for the consumer (drained after end(), or aborted). */
  get finished(): boolean {
    return this.#aborted || (this.#ended && this.#buffered() === 0);
  }

  /** Adds one token. Throws after end(); ignored after abort() (a readback may race a cancel). */
  deposit(item: T): void {
    if (this.#aborted) return;
    if (this.#ended) throw new Error("TokenPacer.deposit after end()");
    if (this.#buffered() === 0) this.#closeStall(this.#clock.now());
    this.#firstDepositAt ??= this.#clock.now();
    this.#depositOccupancy.push(this.#buffered());
    this.#items.push(item);
    this.#deposited++;
    this.#pump();
  }

  /** The producer is done: what is buffered still drains at pace, then iteration ends. */
  end(): void {
    if (this.#ended || this.#aborted) return;
    if (this.#buffered() === 0) this.#closeStall(this.#clock.now());
    this.#ended = true;
    this.#pump();
  }

  /** Drops every buffered token and ends iteration now. Idempotent. */
  abort(): void {
    if (this.#aborted) return;
    if (this.#buffered() === 0) this.#closeStall(this.#clock.now());
    this.#aborted = true;
    this.#resolveClosed();
    this.#items = [];
    this.#head = 0;
    this.#readyAt = null;
    this.#cancelTimer();
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const resolve of waiters) resolve({ done: true, value: undefined });
  }

  occupancy(): PacerOccupancy {
    const tokens = this.#buffered();
    return { tokens, seconds: this.paced ? tokens / this.rate : 0 };
  }

  /**
   * TokenFlow's B_j for every deposited token j, in order: the tokens already in the buffer
   * (deposited and not yet released) when j was deposited; j itself is not counted.
   */
  occupancyAtDeposits(): readonly number[] {
    return this.#depositOccupancy;
  }

  stats(): PacerStats {
    const open = this.#openStallMs(this.#clock.now());
    return {
      released: this.#released,
      deposited: this.#deposited,
      stallMs: this.#stallMs + open,
      stalls: this.#stalls + (open > 0 ? 1 : 0),
      firstDepositAt: this.#firstDepositAt,
      firstReleaseAt: this.#firstReleaseAt,
      lastReleaseAt: this.#lastReleaseAt,
    };
  }

  /** Single consumer. Leaving the loop early (break, throw) aborts the pacer. */
  [Symbol.asyncIterator](): AsyncIterator<T, undefined> {
    if (this.#iterated) throw new Error("TokenPacer supports a single consumer");
    this.#iterated = true;
    return {
      next: () =>
        new Promise<IteratorResult<T, undefined>>((resolve) => {
          this.#waiters.push(resolve);
          this.#pump();
        }),
      return: () => {
        this.abort();
        return Promise.resolve({ done: true, value: undefined });
      },
    };
  }

  #buffered(): number {
    return this.#items.length - this.#head;
  }

  /** Stall time so far in the current empty-buffer period, 0 when none is open. */
  #openStallMs(now: number): number {
    if (!this.paced || this.#released === 0 || this.#ended || this.#aborted) return 0;
    if (this.#buffered() > 0) return 0;
    return Math.max(0, now - this.#nextDueAt);
  }

  /** Books the stall (if any) that ends now because a token arrived or the stream ended. */
  #closeStall(now: number): void {
    const ms = this.#openStallMs(now);
    if (ms > 0) {
      this.#stallMs += ms;
      this.#stalls++;
    }
  }

  /** Releases every token that is due to a waiting consumer; arms one timer for the next. */
  #pump(): void {
    while (this.#waiters.length > 0) {
      if (this.#aborted || (this.#ended && this.#buffered() === 0)) {
        this.#finish();
        return;
      }
      if (this.#buffered() === 0) return;
      const now = this.#clock.now();
      this.#readyAt ??= now;
      const due = Math.max(this.#nextDueAt, this.#readyAt);
      if (now < due) {
        this.#armTimer(due - now);
        return;
      }
      // Late by a whole interval or more (a blocked event loop): restart the cadence from now
      // rather than releasing a burst to catch up. Smaller lateness is timer jitter (at least the
      // 1 ms timer granularity) and stays on the grid, so the average rate holds.
      const late = now - due;
      const scheduled = this.paced && late >= Math.max(this.#intervalMs, 1) ? now : due;
      this.#releaseHead(scheduled, now);
    }
  }

  #releaseHead(scheduled: number, now: number): void {
    const item = this.#items[this.#head];
    this.#items[this.#head] = undefined as T; // let the consumer's copy be the only reference
    this.#head++;
    if (this.#head >= 1024 && this.#head * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    this.#released++;
    this.#firstReleaseAt ??= now;
    this.#lastReleaseAt = now;
    this.#nextDueAt = scheduled + this.#intervalMs;
    this.#readyAt = null;
    this.#waiters.shift()!({ done: false, value: item });
  }

  #finish(): void {
    this.#resolveClosed();
    this.#cancelTimer();
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const resolve of waiters) resolve({ done: true, value: undefined });
  }

  #armTimer(delayMs: number): void {
    if (this.#timer !== null) return;
    // Whole milliseconds, rounded up: timers may truncate fractions and fire early. The release
    // itself is booked at the exact scheduled time, so rounding never accumulates into drift.
    this.#timer = this.#clock.setTimeout(() => {
      this.#timer = null;
      this.#pump();
    }, Math.min(MAX_TIMER_MS, Math.ceil(delayMs)));
  }

  #cancelTimer(): void {
    if (this.#timer === null) return;
    this.#clock.clearTimeout(this.#timer);
    this.#timer = null;
  }
}
