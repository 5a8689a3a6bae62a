// The huge-prompts bench's /health poller, on a thread of the bench's own: the burst's megabyte
// bodies are built and written on the bench's main thread, and that work must not delay a poll
// and be counted as the server's latency. Start: {target, options}; it answers "polling", then
// polls until any further message, and answers with the polls.

/// <reference lib="deno.worker" />

import type { LoopbackTarget } from "../serve/loopback.ts";
import { pollHealth, type PollOptions } from "../responsiveness/stream.ts";

self.onmessage = async (e: MessageEvent<{ target: LoopbackTarget; options: PollOptions }>) => {
  const stop = new AbortController();
  self.onmessage = () => stop.abort();
  const polling = pollHealth(e.data.target, stop.signal, e.data.options);
  self.postMessage("polling");
  self.postMessage(await polling);
};
