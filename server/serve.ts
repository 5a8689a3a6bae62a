// `sluice serve`: starts HTTP at once (health says "loading"), loads the model, and on SIGINT or
// SIGTERM shuts down gracefully (server/shutdown.ts) within the grace period, then exits 0.

import type { OpenModel } from "../runtime/open.ts";
import { createApp } from "./app.ts";
import { ServerMetrics } from "./metrics/server_metrics.ts";
import { shutdown } from "./shutdown.ts";
import type { ServerState } from "./state.ts";

/** The `serve` flags the server reads; the runtime's own (limits, defaults) go to `load`. */
export interface ServeOptions {
  host: string;
  port: number;
  model: string;
  "api-key"?: string;
  "max-body-kb": number;
  "shutdown-grace-s": number;
}

export async function serve(flags: ServeOptions, load: () => Promise<OpenModel>): Promise<void> {
  const state: ServerState = { model: { status: "loading" }, draining: false };
  const metrics = new ServerMetrics();
  const app = createApp(state, {
    modelId: flags.model,
    apiKey: flags["api-key"],
    maxBodyBytes: flags["max-body-kb"] * 1024,
  }, metrics);

  const server = Deno.serve({
    hostname: flags.host,
    port: flags.port,
    onListen: ({ hostname, port }) =>
      console.error(`sluice: listening on http://${hostname}:${port}`),
  }, app.fetch);

  const grace = flags["shutdown-grace-s"];
  const stop = async (signal: string) => {
    if (state.draining) return;
    console.error(`sluice: ${signal}: draining (up to ${grace} s)`);
    await shutdown(state, metrics, server, grace * 1000);
    console.error("sluice: stopped");
    Deno.exit(0);
  };
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, () => void stop(sig));
  }

  try {
    const { runtime, tokenizer } = await load();
    state.model = { status: "ready", runtime, tokenizer };
    console.error(
      `sluice: ready at http://${flags.host}:${server.addr.port} (model '${flags.model}')`,
    );
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    state.model = { status: "failed", error: message };
    console.error(`sluice: model failed to load: ${message}`);
  }
  await server.finished;
}
