// Plays a submitted request out to its client: takes its tokens from the runtime at the reader's
// pace, turns them into text pieces (stop strings cut, their prefixes held back), and says how it
// ended: a finish reason when the client got a complete answer, else a thrown ApiError (503 cut by
// shutdown, 500 failed, 499 the client went away). A client that goes away stops the playback at
// once, whatever is still buffered.

import type { FinishInfo, RequestHandle } from "../../runtime/service.ts";
import { ApiError, clientClosed, cutByShutdown } from "../openai/errors.ts";
import type { FinishReason } from "../openai/responses.ts";
import type { RequestObserver } from "../metrics/server_metrics.ts";
import type { TextPiece, TextStream } from "./text_stream.ts";

export interface Playback {
  handle: RequestHandle;
  text: TextStream;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
  observer: RequestObserver;
}

/** What play() reads of a playback: its observer is told only of tokens read and of stalls. */
export type Played = Omit<Playback, "observer"> & {
  observer: Pick<RequestObserver, "token" | "stalled">;
};

export async function play(
  { handle, text, signal, observer }: Played,
  emit: (piece: TextPiece) => Promise<void> | void,
): Promise<FinishReason> {
  const tokens = handle.tokens[Symbol.asyncIterator]();
  // Leaving the token buffer drops what it holds and ends a pending wait at once.
  const stopReading = () => void tokens.return?.();
  signal.addEventListener("abort", stopReading, { once: true });
  try {
    for (let next = await tokens.next(); !next.done; next = await tokens.next()) {
      observer.token();
      const piece = text.push(next.value);
      if (piece.text || piece.tokens.length) await emit(piece);
      if (text.stopped) return "stop"; // a stop string: the finally below ends the request
    }
    if (signal.aborted) throw clientClosed();
    const finish = await handle.done;
    if (finish.reason !== "stop" && finish.reason !== "length") throw endError(finish);
    const rest = text.flush();
    if (rest.text || rest.tokens.length) await emit(rest);
    return finish.reason;
  } finally {
    signal.removeEventListener("abort", stopReading);
    await tokens.return?.();
    handle.cancel(); // frees the request's KV at the next step if it is still generating
    observer.stalled(handle.bufferStats().stallMs / 1000);
  }
}

/** Why a request that did not complete ended, as the client's error. */
function endError(finish: FinishInfo): ApiError {
  switch (finish.reason) {
    case "cancelled":
      return clientClosed();
    case "error":
      return new ApiError(500, `Generation failed: ${finish.error ?? "unknown error"}`);
    default:
      return cutByShutdown();
  }
}
