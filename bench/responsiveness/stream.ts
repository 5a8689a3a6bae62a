// The responsiveness bench's two kinds of traffic against the loopback server: a streaming
// completion that timestamps every token-carrying SSE chunk as it is read off the socket (and can
// be hung up on), and a back-to-back /health poller that runs until told to stop. Every wait is
// bounded by a timeout or a signal.

import { tokensInChunk } from "../serve/client.ts";
import { getText, loopbackRequest, readText } from "../serve/http.ts";
import type { LoopbackTarget } from "../serve/loopback.ts";
import { SseParser } from "../serve/sse.ts";
import type { ChunkArrival } from "./stats.ts";

export interface StreamRequest {
  model: string;
  prompt: number[];
  maxTokens: number;
  /** Tokens/s (Sluice's pacer); unpaced when absent. */
  readingRate?: number;
}

export interface StreamEnd {
  outcome: "ok" | "cancelled" | "failed";
  error?: string;
}

export interface Stream {
  /** When the request was sent, on performance.now(). */
  sentAtMs: number;
  /** Token-carrying chunks in arrival order, times on performance.now(). */
  chunks: ChunkArrival[];
  /** Resolves with the first chunk's arrival time; rejects if the stream ends without one. */
  firstToken: Promise<number>;
  done: Promise<StreamEnd>;
  /** Whether `done` has settled. */
  ended(): boolean;
  /** Hangs up (the server cancels the request); safe to call more than once. */
  cancel(): void;
}

export function requestBody(r: StreamRequest): string {
  return JSON.stringify({
    model: r.model,
    prompt: r.prompt,
    max_tokens: r.maxTokens,
    stream: true,
    temperature: 0,
    ignore_eos: true,
    ...(r.readingRate === undefined ? {} : { reading_rate: r.readingRate }),
  });
}

/** Sends one streaming completion; `signal` (a run deadline) also hangs up. */
export function openStream(
  target: LoopbackTarget,
  r: StreamRequest,
  timeoutMs: number,
  signal?: AbortSignal,
): Stream {
  const hangup = new AbortController();
  const all = AbortSignal.any([
    hangup.signal,
    AbortSignal.timeout(timeoutMs),
    ...(signal ? [signal] : []),
  ]);
  const chunks: ChunkArrival[] = [];
  const first = Promise.withResolvers<number>();
  first.promise.catch(() => {}); // callers that never await it must not see an unhandled rejection
  const onChunk = (at: number, tokens: number) => {
    if (chunks.length === 0) first.resolve(at);
    chunks.push({ atMs: at, tokens });
  };
  const sentAtMs = performance.now();
  let ended = false;
  const done = readStream(target, r, all, onChunk).then(
    (): StreamEnd => ({ outcome: "ok" }),
    (e): StreamEnd =>
      hangup.signal.aborted
        ? { outcome: "cancelled" }
        : { outcome: "failed", error: e instanceof Error ? e.message : String(e) },
  ).then((end) => {
    ended = true;
    first.reject( // no-op once the first token came
      new Error(
        `stream ended (${end.outcome}${end.error ? `: ${end.error}` : ""}) before its first token`,
      ),
    );
    return end;
  });
  return {
    sentAtMs,
    chunks,
    firstToken: first.promise,
    done,
    ended: () => ended,
    cancel: () => hangup.abort(),
  };
}

/** Reads the SSE stream to [DONE], calling `onChunk` per token-carrying chunk. */
async function readStream(
  target: LoopbackTarget,
  r: StreamRequest,
  signal: AbortSignal,
  onChunk: (atMs: number, tokens: number) => void,
): Promise<void> {
  const res = await loopbackRequest(target, {
    method: "POST",
    path: "/v1/completions",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: requestBody(r),
    signal,
  });
  if (res.status !== 200) {
    const text = await readText(res, 64 * 1024).catch(() => "");
    throw new Error(`HTTP ${res.status}: ${text.slice(0, 200)}`);
  }
  const parser = new SseParser();
  for await (const bytes of res.body) {
    const at = performance.now();
    for (const data of parser.push(bytes)) {
      if (data === "[DONE]") {
        res.close();
        return;
      }
      const chunk = JSON.parse(data);
      if (chunk?.error) {
        throw new Error(`error chunk: ${JSON.stringify(chunk.error).slice(0, 200)}`);
      }
      const tokens = tokensInChunk(chunk);
      if (tokens > 0) onChunk(at, tokens);
    }
  }
  throw new Error("stream ended without [DONE]");
}

export interface HealthPolls {
  /** Request sent to answer read, ms, for every poll (failed ones too). */
  latenciesMs: number[];
  /** Polls that failed or did not answer 200. */
  failures: number;
  /** Why the loop stopped. */
  stoppedBy: "signal" | "max-polls" | "deadline";
}

export interface PollOptions {
  /** Start-to-start spacing; a poll slower than this is followed at once by the next. */
  intervalMs: number;
  /** Per-poll timeout. */
  pollTimeoutMs: number;
  maxPolls: number;
  deadlineMs: number;
}

/** Polls GET /health one at a time until `stop` aborts (the poll in flight then completes). */
export async function pollHealth(
  target: LoopbackTarget,
  stop: AbortSignal,
  o: PollOptions,
): Promise<HealthPolls> {
  const latenciesMs: number[] = [];
  let failures = 0;
  const end = performance.now() + o.deadlineMs;
  while (!stop.aborted) {
    if (latenciesMs.length >= o.maxPolls) return { latenciesMs, failures, stoppedBy: "max-polls" };
    if (performance.now() >= end) return { latenciesMs, failures, stoppedBy: "deadline" };
    const start = performance.now();
    try {
      const h = await getText(target, "/health", o.pollTimeoutMs);
      if (h.status !== 200) failures++;
    } catch {
      failures++;
    }
    latenciesMs.push(performance.now() - start);
    await sleepUntil(start + o.intervalMs, stop);
  }
  return { latenciesMs, failures, stoppedBy: "signal" };
}

/** Sleeps until the given performance.now() time, or until `signal` aborts. */
export function sleepUntil(atMs: number, signal?: AbortSignal): Promise<void> {
  const ms = atMs - performance.now();
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
