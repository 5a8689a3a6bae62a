// A running request answered as Server-Sent Events, one chunk per piece of text as its playback
// releases it. A complete stream ends with the finish chunk, the usage chunk when asked, and
// `data: [DONE]`. A stream that cannot complete (cut by shutdown, failed) ends instead with one
// OpenAI error event, `data: {"error":{...}}`, and nothing after it: no finish chunk and no [DONE],
// so no client can take a cut stream for a complete one (OpenAI's clients raise on that event).
// While a stream has nothing to send (queued, prefilling, paused), a comment line goes out every
// `keepAliveMs`: proxies that cut a connection idle for 60 s never cut a stream, and clients
// ignore comments.

import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import { ApiError } from "../openai/errors.ts";
import type { BuiltRequest } from "./build.ts";
import { play, type Playback } from "./playback.ts";

/** Default ms of silence after which a stream sends a keep-alive comment (`--sse-keepalive-s`). */
export const SSE_KEEPALIVE_MS = 5000;

export function respondSse(
  c: Context,
  req: BuiltRequest,
  run: Playback,
  abort: AbortController,
  keepAliveMs = SSE_KEEPALIVE_MS,
) {
  run.observer.keepOpen(); // this stream, not the counting middleware, reports the final status
  return streamSSE(c, async (sse) => {
    sse.onAbort(() => abort.abort());
    let lastWrite = Date.now();
    const send = (obj: object) => {
      lastWrite = Date.now();
      return sse.writeSSE({ data: JSON.stringify(obj) });
    };
    // Each write is one whole event or comment, so a comment never lands inside a chunk.
    const keepAlive = setInterval(() => {
      if (Date.now() - lastWrite < keepAliveMs || sse.aborted || sse.closed) return;
      lastWrite = Date.now();
      sse.write(": keep-alive\n\n").catch(() => {});
    }, Math.max(1, Math.floor(keepAliveMs / 4)));
    let status = 200;
    try {
      for (const chunk of req.writer.opening()) await send(chunk);
      const timingFrom = req.includeTiming ? run.observer.arrivedMs : null;
      const finish = await play(run, (piece) => send(req.writer.piece(piece, timingFrom)));
      await send(req.writer.finish(finish));
      if (req.includeUsage) await send(req.writer.usage(run.observer.tokens));
      await sse.writeSSE({ data: "[DONE]" });
    } catch (err) {
      const apiErr = ApiError.from(err);
      status = apiErr.status;
      if (!abort.signal.aborted) await send(apiErr.toJSON());
    } finally {
      clearInterval(keepAlive);
      run.observer.finish(abort.signal.aborted ? 499 : status);
    }
  });
}
