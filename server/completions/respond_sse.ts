// A running request answered as Server-Sent Events, one chunk per piece of text as its playback
// releases it. A complete stream ends with the finish chunk, the usage chunk when asked, and
// `data: [DONE]`. A stream that cannot complete (cut by shutdown, failed) ends instead with one
// OpenAI error event, `data: {"error":{...}}`, and nothing after it: no finish chunk and no [DONE],
// so no client can take a cut stream for a complete one (OpenAI's clients raise on that event).
// While a stream has nothing to send, keep-alive comments go out (server/sse/keep_alive.ts).

import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import { ApiError } from "../openai/errors.ts";
import { keepAlive } from "../sse/keep_alive.ts";
import type { BuiltRequest } from "./build.ts";
import { play, type Playback } from "./playback.ts";

export function respondSse(
  c: Context,
  req: BuiltRequest,
  run: Playback,
  abort: AbortController,
  keepAliveMs?: number,
) {
  run.observer.keepOpen(); // this stream, not the counting middleware, reports the final status
  return streamSSE(c, async (sse) => {
    sse.onAbort(() => abort.abort());
    const out = keepAlive(sse, keepAliveMs);
    const send = (obj: object) => out.write({ data: JSON.stringify(obj) });
    let status = 200;
    try {
      for (const chunk of req.writer.opening()) await send(chunk);
      const timingFrom = req.includeTiming ? run.observer.arrivedMs : null;
      const finish = await play(run, (piece) => send(req.writer.piece(piece, timingFrom)));
      await send(req.writer.finish(finish));
      if (req.includeUsage) await send(req.writer.usage(run.observer.tokens));
      await out.write({ data: "[DONE]" });
    } catch (err) {
      const apiErr = ApiError.from(err);
      status = apiErr.status;
      if (!abort.signal.aborted) await send(apiErr.toJSON());
    } finally {
      out.stop();
      run.observer.finish(abort.signal.aborted ? 499 : status);
    }
  });
}
