// SSE keep-alive: while a stream has nothing to send (queued, prefilling, paused), a comment line
// goes out every `ms`, so proxies that cut a connection idle for 60 s never cut a stream; clients
// ignore comments. Every write goes through `write`, one whole event at a time, so a comment never
// lands inside an event.

import type { SSEMessage, SSEStreamingApi } from "hono/streaming";

/** Default ms of silence after which a stream sends a keep-alive comment (`--sse-keepalive-s`). */
export const SSE_KEEPALIVE_MS = 5000;

export interface KeptAlive {
  /** Writes one whole event. */
  write(message: SSEMessage): Promise<void>;
  /** Stops the comments (the stream is over). */
  stop(): void;
}

export function keepAlive(sse: SSEStreamingApi, ms = SSE_KEEPALIVE_MS): KeptAlive {
  let lastWrite = Date.now();
  const timer = setInterval(() => {
    if (Date.now() - lastWrite < ms || sse.aborted || sse.closed) return;
    lastWrite = Date.now();
    sse.write(": keep-alive\n\n").catch(() => {});
  }, Math.max(1, Math.floor(ms / 4)));
  return {
    write: (message) => {
      lastWrite = Date.now();
      return sse.writeSSE(message);
    },
    stop: () => clearInterval(timer),
  };
}
