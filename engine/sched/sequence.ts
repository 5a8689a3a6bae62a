// One request's state inside the engine: its prompt, how far prefill and generation have got,
// its KV slot, and the stream its tokens are pushed to.

import type { SamplingParams } from "../model/forward.ts";
import { AsyncQueue } from "./async_queue.ts";

export interface TokenEvent {
  id: number;
  logprob: number;
  /** The top-K alternatives (id, logprob), when the request asked for them. */
  top: [number, number][];
}

export type FinishReason = "stop" | "length" | "cancelled" | "error";

export interface FinishInfo {
  reason: FinishReason;
  promptTokens: number;
  completionTokens: number;
  error?: string;
}

export interface GenerateRequest {
  ids: number[];
  maxTokens: number;
  sampling: SamplingParams;
  /** 0 = none; at most the engine's maxTopLogprobs. */
  topLogprobs?: number;
  /** Token ids that end generation (not emitted). Defaults to the model's EOS ids. */
  stopIds?: number[];
  signal?: AbortSignal;
}

export type SequenceState = "waiting" | "running" | "finished";

export class Sequence {
  state: SequenceState = "waiting";
  slot = -1;
  /** Prompt tokens whose KV has been written. */
  prefilled = 0;
  /** Tokens whose sampling has been submitted to the GPU. */
  issued = 0;
  /** Tokens read back and delivered. */
  received = 0;
  cancelled = false;
  finish: FinishInfo | null = null;
  readonly events = new AsyncQueue<TokenEvent>();
  readonly done: Promise<FinishInfo>;
  private resolveDone!: (f: FinishInfo) => void;

  constructor(readonly id: number, readonly req: GenerateRequest, readonly stopIds: Set<number>) {
    this.done = new Promise((r) => this.resolveDone = r);
  }

  get promptLength(): number {
    return this.req.ids.length;
  }

  /** KV positions this request can ever need: the prompt plus every generated token but the last. */
  get reservedTokens(): number {
    return this.promptLength + this.req.maxTokens;
  }

  get prefillDone(): boolean {
    return this.prefilled === this.promptLength;
  }

  /** Marks the sequence finished and ends its stream; idempotent. */
  end(reason: FinishReason, error?: string): void {
    if (this.finish) return;
    this.state = "finished";
    this.finish = {
      reason,
      promptTokens: this.promptLength,
      completionTokens: this.received,
      error,
    };
    if (reason === "error") this.events.fail(new Error(error ?? "generation failed"));
    else this.events.close();
    this.resolveDone(this.finish);
  }
}
