// A streaming request as the deploy tests watch it: when each SSE event arrived (to tell a stream
// passed through unbuffered from one delivered in a few bursts), whether it ended with [DONE] or
// was cut, and which instance answered. Every stream has a deadline, so a hang fails the test
// rather than stalling it.

export interface StreamResult {
  status: number;
  headers: Headers;
  /** nginx's X-Sluice-Upstream: the instances tried, the last one answered ("a, b"). */
  upstream: string;
  /** Arrival time (performance.now()) of each event that carried content. */
  contentTimes: number[];
  finishReason: string | null;
  done: boolean;
  /** Why the stream ended without [DONE], if it did. */
  error: string | null;
  endedAt: number;
}

export interface RunningStream {
  /** Resolves once `count` content events have arrived (or the stream has ended). */
  received(count: number): Promise<void>;
  /** The response's status and headers, once they have arrived (rejects if none did). */
  response: Promise<Response>;
  result: Promise<StreamResult>;
}

export function startStream(url: string, body: unknown, deadlineMs: number): RunningStream {
  const contentTimes: number[] = [];
  const response = Promise.withResolvers<Response>();
  response.promise.catch(() => {}); // a test that never asks must not see it rejected
  const waiters: { count: number; resolve: () => void }[] = [];
  const wake = (all: boolean) => {
    for (const w of [...waiters]) {
      if (all || contentTimes.length >= w.count) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  };
  const read = async (out: StreamResult, signal: AbortSignal): Promise<StreamResult> => {
    let res: Response;
    try {
      res = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", "accept-encoding": "gzip, br" },
        body: JSON.stringify(body),
        signal,
      });
    } catch (err) {
      response.reject(err);
      return { ...out, error: messageOf(err), endedAt: performance.now() };
    }
    response.resolve(res);
    out.status = res.status;
    out.headers = res.headers;
    out.upstream = res.headers.get("x-sluice-upstream") ?? "";
    const decoder = new TextDecoder();
    let buffered = "";
    try {
      for await (const bytes of res.body!) {
        const now = performance.now();
        buffered += decoder.decode(bytes, { stream: true });
        const events = buffered.split("\n\n");
        buffered = events.pop()!;
        for (const event of events) {
          if (!event.startsWith("data: ")) continue; // a comment or a keep-alive
          const data = event.slice("data: ".length);
          if (data === "[DONE]") {
            out.done = true;
            continue;
          }
          const choice = JSON.parse(data).choices?.[0];
          if (choice?.delta?.content) contentTimes.push(now);
          out.finishReason = choice?.finish_reason ?? out.finishReason;
        }
        wake(false);
      }
    } catch (err) {
      out.error = messageOf(err);
    }
    if (!out.done && out.error === null) out.error = "ended without [DONE]";
    out.endedAt = performance.now();
    return out;
  };
  const result = (async (): Promise<StreamResult> => {
    const out: StreamResult = {
      status: 0,
      headers: new Headers(),
      upstream: "",
      contentTimes,
      finishReason: null,
      done: false,
      error: null,
      endedAt: 0,
    };
    const abort = new AbortController();
    const deadline = setTimeout(() => abort.abort(new Error("stream deadline passed")), deadlineMs);
    try {
      return await read(out, abort.signal);
    } finally {
      clearTimeout(deadline);
    }
  })().finally(() => wake(true));

  return {
    response: response.promise,
    received: (count) =>
      contentTimes.length >= count ? Promise.resolve() : new Promise((resolve) => {
        waiters.push({ count, resolve });
      }),
    result,
  };
}

function messageOf(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

/** The last instance nginx tried: the one that answered. */
export function answeredBy(upstream: string): string {
  return upstream.split(",").at(-1)!.trim();
}

/**
 * How many times content arrived after a pause of more than `gapMs`: about one per event when
 * events pass through as they are made, a handful when a proxy buffers them.
 */
export function deliveries(times: number[], gapMs: number): number {
  return times.filter((t, i) => i === 0 || t - times[i - 1] > gapMs).length;
}
