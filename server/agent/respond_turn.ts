// Answers a chat run in another API's wire format: its assistant events go through that API's turn
// writer, as Server-Sent Events or as one JSON body. A turn that ends complete (stop, length, tool
// calls) ends with the writer's closing events; one that cannot complete (cut by shutdown, failed,
// the client gone) throws its ApiError before anything is sent, or, once a stream has begun, ends
// it with the writer's error event and nothing after, so no client takes it for a complete answer.

import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { RequestObserver } from "../metrics/server_metrics.ts";
import { ApiError, clientClosed, cutByShutdown } from "../openai/errors.ts";
import { keepAlive } from "../sse/keep_alive.ts";
import type { AssistantEvent } from "./assistant_events.ts";
import type { ChatRun, TurnEnd } from "./chat_run.ts";

/** An SSE event: its `event:` name and its JSON `data:`. */
export interface WireEvent {
  event: string;
  data: object;
}

/** What is read of a chat run. */
export type Turn = Pick<ChatRun, "events" | "done">;

/** The finishes of a complete answer; the others end in an error. */
export type CompleteFinish = "stop" | "length" | "tool_calls";

/** Writes one API's answer from a turn's events. */
export interface TurnWriter {
  /** The events a stream opens with, before any assistant event. */
  start(): WireEvent[];
  push(ev: AssistantEvent): WireEvent[];
  /** The events that close a complete turn. */
  end(finish: CompleteFinish, completionTokens: number, stopSequence?: string): WireEvent[];
  /** The whole answer, once `end` was called. */
  whole(): object;
  /** The last event of a stream that cannot complete. */
  failed(err: ApiError): WireEvent;
}

export interface TurnResponse {
  stream: boolean;
  /** Aborted when the client goes away; the run stops with it. */
  abort: AbortController;
  observer: RequestObserver;
  keepAliveMs?: number;
}

export function respondTurn(c: Context, turn: Turn, writer: TurnWriter, opts: TurnResponse) {
  return opts.stream ? respondStream(c, turn, writer, opts) : respondWhole(c, turn, writer);
}

async function respondWhole(c: Context, turn: Turn, writer: TurnWriter) {
  for await (const ev of turn.events) writer.push(ev);
  const { finish, completionTokens, stopSequence } = completed(await turn.done);
  writer.end(finish, completionTokens, stopSequence);
  return c.json(writer.whole());
}

function respondStream(c: Context, turn: Turn, writer: TurnWriter, opts: TurnResponse) {
  const { abort, observer } = opts;
  observer.keepOpen(); // this stream, not the counting middleware, reports the final status
  return streamSSE(c, async (sse) => {
    sse.onAbort(() => abort.abort());
    const out = keepAlive(sse, opts.keepAliveMs);
    const send = async (events: WireEvent[]) => {
      for (const e of events) await out.write({ event: e.event, data: JSON.stringify(e.data) });
    };
    let status = 200;
    try {
      await send(writer.start());
      for await (const ev of turn.events) await send(writer.push(ev));
      const { finish, completionTokens, stopSequence } = completed(await turn.done);
      await send(writer.end(finish, completionTokens, stopSequence));
    } catch (err) {
      const apiErr = ApiError.from(err);
      status = apiErr.status;
      if (!abort.signal.aborted) await send([writer.failed(apiErr)]);
    } finally {
      out.stop();
      observer.finish(abort.signal.aborted ? 499 : status);
    }
  });
}

/** A complete turn's ending; throws the error of one that is not. */
export function completed(end: TurnEnd): TurnEnd & { finish: CompleteFinish } {
  const { finish } = end;
  if (finish === "stop" || finish === "length" || finish === "tool_calls") {
    return { ...end, finish };
  }
  if (end.error) throw end.error;
  if (finish === "cancelled") throw clientClosed();
  if (finish === "shutdown") throw cutByShutdown();
  throw new ApiError(500, "Generation failed");
}
