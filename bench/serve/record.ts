// What one client observed for one request: the raw material every metric is computed from.

export type Outcome =
  /** The stream ended with [DONE] (possibly with zero tokens). */
  | "ok"
  /** 429: the admission queue was full. Not retried. */
  | "refused"
  /** Any other HTTP error, a broken stream, or an error chunk. */
  | "failed"
  /** The reader hung up on purpose (the workload's cancel_after_tokens). */
  | "cancelled"
  /** Hit the per-request timeout or the whole-run deadline. */
  | "timeout";

export interface RequestRecord {
  id: number;
  outcome: Outcome;
  httpStatus?: number;
  error?: string;
  /** Seconds the server asked a refused client to wait (Retry-After). */
  retryAfterS?: number;
  /** When the request was sent, ms since the run started. */
  sentAtMs: number;
  /** When the client was done with it (stream end, error, hang-up), ms since the run started. */
  endAtMs: number;
  /** Token i's arrival at the client, ms since sentAtMs. */
  arrivalsMs: number[];
  /** Token i's display to the reader, ms since sentAtMs (see playout.ts). */
  displayMs: number[];
  /**
   * Token i's generation at the server (it entered the server's token buffer), in ms since the
   * server received the request (taken as ms since sentAtMs: loopback), from Sluice's
   * `sluice_timing`; absent when the server did not report it for every token.
   */
  generatedMs?: number[];
  readingRate: number;
  sloTtftMs: number;
  sloTbtMs: number;
  /** max_tokens as sent. */
  maxTokens: number;
  promptTokens?: number;
  finishReason?: string;
  /** usage.completion_tokens from the final chunk, when the server sent one. */
  usageCompletionTokens?: number;
}
