// Graceful shutdown, in order: refuse new work (health says "draining"; the runtime refuses new
// requests, which get 503), let running requests and their paced streams play out until the grace
// period ends, then close the prompt encoder's tokenizer Worker (a prompt still being tokenized
// gets 503) and the runtime, which ends whatever is still generating or buffered (those clients
// get an error, never a normal finish), and stop the HTTP server once they have it. A
// client that stopped reading cannot hold the exit: the server gets at most `lingerMs` more.
// `serve` runs this on SIGINT/SIGTERM; tests call it directly.

import type { ServerMetrics } from "./metrics/server_metrics.ts";
import type { ServerState } from "./state/server_state.ts";

/** The part of Deno.HttpServer that shutdown uses. */
export interface HttpServer {
  shutdown(): Promise<void>;
}

export async function shutdown(
  state: ServerState,
  metrics: ServerMetrics,
  server: HttpServer,
  graceMs: number,
  lingerMs = 2000,
): Promise<void> {
  state.draining = true;
  for (const { model } of state.models.loaded()) model.chat?.runtime.drain();
  const deadline = performance.now() + graceMs;
  const busy = () => state.models.inFlight() > 0 || metrics.openRequests > 0;
  while (busy() && performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, Math.min(50, deadline - performance.now())));
  }
  await state.models.close();
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    server.shutdown(),
    new Promise((r) => timer = setTimeout(r, lingerMs)),
  ]);
  clearTimeout(timer);
}
