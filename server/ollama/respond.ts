// Answers a running reply as Ollama does: newline-delimited JSON (application/x-ndjson), one object
// per piece and a last one with done: true, or, with stream: false, one JSON object. An answer
// that fails once its stream has begun ends with an {"error": "..."} line and nothing after (the
// `ollama` clients throw on it). Durations are measured here, in nanoseconds: load 0 (the model is
// loaded before any request), prompt evaluation from the request's arrival to the first piece, evaluation after it.

import type { Context } from "hono";
import { stream as streamBody } from "hono/streaming";
import type { RequestObserver } from "../metrics/server_metrics.ts";
import { ApiError } from "../openai/errors.ts";
import { ollamaError } from "./errors.ts";
import type { Delta, Reply, ReplyEnd } from "./reply.ts";
import type { OllamaWire, Stats } from "./wire.ts";

export interface Answer {
  reply: Reply;
  wire: OllamaWire;
  stream: boolean;
  abort: AbortController;
  observer: RequestObserver;
}

class Clock {
  firstAt: number | null = null;
  constructor(readonly startedAt: number) {}

  piece(): void {
    this.firstAt ??= performance.now();
  }

  stats(reply: Reply, end: ReplyEnd): Stats {
    const now = performance.now();
    const first = this.firstAt ?? now;
    const ns = (ms: number) => Math.max(0, Math.round(ms * 1e6));
    return {
      total_duration: ns(now - this.startedAt),
      load_duration: 0,
      prompt_eval_count: reply.promptTokens,
      prompt_eval_duration: ns(first - this.startedAt),
      eval_count: end.evalCount,
      eval_duration: ns(now - first),
    };
  }
}

export function respondOllama(c: Context, answer: Answer): Response | Promise<Response> {
  // A stream's headers go out at once, before its first object.
  c.header("sluice-request-id", answer.reply.id);
  return answer.stream ? respondStream(c, answer) : respondWhole(c, answer);
}

async function respondWhole(c: Context, { reply, wire, observer }: Answer) {
  const clock = new Clock(observer.arrivedMs);
  const deltas: Delta[] = [];
  for await (const d of reply.deltas) {
    clock.piece();
    deltas.push(d);
  }
  const end = await reply.end();
  return c.json(wire.whole(deltas, end, clock.stats(reply, end)));
}

function respondStream(c: Context, { reply, wire, abort, observer }: Answer) {
  observer.keepOpen(); // this stream, not the counting middleware, reports the final status
  c.header("Content-Type", "application/x-ndjson");
  return streamBody(c, async (out) => {
    out.onAbort(() => abort.abort());
    const clock = new Clock(observer.arrivedMs);
    const send = (o: object) => out.write(JSON.stringify(o) + "\n");
    let status = 200;
    try {
      for await (const d of reply.deltas) {
        clock.piece();
        await send(wire.piece(d));
      }
      const end = await reply.end();
      await send(wire.last(end, clock.stats(reply, end)));
    } catch (err) {
      const e = ApiError.from(err);
      status = e.status;
      if (!abort.signal.aborted) await send(ollamaError(e));
    } finally {
      observer.finish(abort.signal.aborted ? 499 : status);
    }
  });
}
