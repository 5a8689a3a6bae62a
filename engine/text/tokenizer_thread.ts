// The tokenizer on a thread of its own (a Worker), for prompts large enough that encoding them
// would hold up the thread that serves HTTP. The Worker starts on the first prompt it is given,
// from the tokenizer files serialized once at load: starting it costs this thread a copy of those
// bytes, not a walk of the vocabulary. Prompts are encoded one at a time, in order. What the
// tokenizer throws comes back as it was thrown here (ChatTemplateError stays one); a Worker that
// dies fails what it had, and the next prompt starts a fresh one. close() ends it.

import type { Prompt } from "./prompt.ts";
import { ChatTemplateError } from "./tokenizer.ts";
import type { FromTokenizer, ToTokenizer } from "./tokenizer_protocol.ts";

/** A prompt given to a closed tokenizer thread, or still pending when it closed. */
export class TokenizerClosed extends Error {
  constructor() {
    super("The tokenizer has been closed (the server is shutting down)");
    this.name = "TokenizerClosed";
  }
}

interface Pending {
  resolve(ids: number[]): void;
  reject(err: Error): void;
}

export class TokenizerThread {
  /** Prompts sent to the Worker (for tests and benches). */
  sent = 0;
  #worker: Worker | null = null;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #closed = false;

  /** @param files the TokenizerFiles as UTF-8 JSON (what the Worker builds its tokenizer from). */
  constructor(private readonly files: Uint8Array) {}

  /** Prompts sent and not yet answered. */
  get pending(): number {
    return this.#pending.size;
  }

  encode(prompt: Prompt): Promise<number[]> {
    if (this.#closed) return Promise.reject(new TokenizerClosed());
    const id = this.#nextId++;
    const { promise, resolve, reject } = Promise.withResolvers<number[]>();
    this.#pending.set(id, { resolve, reject });
    this.#start().postMessage({ type: "encode", id, prompt } satisfies ToTokenizer);
    this.sent++;
    return promise;
  }

  /** Ends the Worker; prompts still pending fail with TokenizerClosed. Idempotent. */
  close(): void {
    this.#closed = true;
    this.#stop(new TokenizerClosed());
  }

  #start(): Worker {
    if (this.#worker) return this.#worker;
    // The URL is written inside `new Worker(...)` so `deno compile`'s --include check finds it.
    const worker = new Worker(new URL("./tokenizer_worker.ts", import.meta.url).href, {
      type: "module",
    });
    worker.onmessage = (e: MessageEvent<FromTokenizer>) => this.#answer(e.data);
    worker.onerror = (e: ErrorEvent) => {
      e.preventDefault(); // the server goes on; the prompts it held fail
      this.#stop(new Error(`the tokenizer's Worker failed: ${e.message}`));
    };
    // A copy: the bytes stay here for a Worker started after this one dies.
    worker.postMessage({ type: "load", files: this.files } satisfies ToTokenizer);
    this.#worker = worker;
    return worker;
  }

  #answer(msg: FromTokenizer): void {
    const p = this.#pending.get(msg.id);
    if (!p) return;
    this.#pending.delete(msg.id);
    if (msg.type === "ids") p.resolve(plainArray(msg.ids));
    else p.reject(msg.chatTemplate ? new ChatTemplateError(msg.message) : new Error(msg.message));
  }

  #stop(err: Error): void {
    this.#worker?.terminate();
    this.#worker = null;
    for (const p of this.#pending.values()) p.reject(err);
    this.#pending.clear();
  }
}

/**
 * The ids as a plain array, by a loop: Array.from walks a typed array about a hundred times slower
 * (a megabyte's 650k ids took 150–300 ms of this thread, the one serving HTTP).
 */
function plainArray(ids: Uint32Array): number[] {
  const out = new Array<number>(ids.length);
  for (let i = 0; i < ids.length; i++) out[i] = ids[i];
  return out;
}
