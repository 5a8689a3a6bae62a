// A stream asked of a model that is not loaded yet: rather than hold the client with no answer for
// the whole load (a shader compile on a cold cache takes minutes with GL), the SSE response starts
// at once with keep-alive comments, and once the model is loaded carries the stream the route
// builds, byte for byte. Anything that fails before that stream (the load, the prompt) goes out as
// one error event in the API's own shape, and the stream ends: headers are sent by then, so the
// status is the event's. The stream's own headers (sluice-request-id) are not sent on this path.

import type { RequestObserver } from "../metrics/server_metrics.ts";
import { ApiError } from "../openai/errors.ts";
import { SSE_KEEPALIVE_MS } from "./keep_alive.ts";

export interface WhileLoading {
  /** Builds the stream once the model is loaded (the route's usual answer). */
  answer(): Promise<Response>;
  /** One whole SSE event for an error, in the API's shape. */
  errorEvent(err: ApiError): string;
  observer: RequestObserver;
  keepAliveMs?: number;
  /** The model's id, named in the first comment. */
  modelId: string;
}

const encoder = new TextEncoder();

export function streamWhileLoading(w: WhileLoading): Response {
  w.observer.keepOpen(); // this stream, or the one it carries, reports the final status
  let inner: ReadableStreamDefaultReader<Uint8Array> | null = null;
  let timer: ReturnType<typeof setInterval> | undefined;
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      const send = (text: string) => controller.enqueue(encoder.encode(text));
      send(`: loading model '${w.modelId}'\n\n`);
      timer = setInterval(() => send(": keep-alive\n\n"), w.keepAliveMs ?? SSE_KEEPALIVE_MS);
      let response: Response;
      try {
        response = await w.answer();
      } catch (err) {
        clearInterval(timer);
        const e = ApiError.from(err);
        send(w.errorEvent(e));
        controller.close();
        w.observer.finish(e.status);
        return;
      }
      clearInterval(timer);
      if (!response.body) {
        controller.close();
        return;
      }
      inner = response.body.getReader();
      try {
        for (;;) {
          const { done, value } = await inner.read();
          if (done) break;
          controller.enqueue(value);
        }
        controller.close();
      } catch (err) {
        controller.error(err);
      }
    },
    cancel(reason) {
      clearInterval(timer);
      return inner?.cancel(reason);
    },
  });
  return new Response(body, {
    headers: {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      connection: "keep-alive",
    },
  });
}
