// `sluice serve`: starts HTTP at once (health says "loading"), loads the engine, and shuts down
// gracefully on SIGINT/SIGTERM: refuse new work, let running streams finish within a grace period,
// then cancel the rest and exit 0.

import type { OpenModel } from "../runtime/open.ts";
import { createApp, type ServerState } from "./app.ts";
import { ServerMetrics } from "./server_metrics.ts";

export interface ServeOptions {
  host: string;
  port: number;
  model: string;
  "api-key"?: string;
  "max-queue": number;
  "max-body-kb": number;
  "max-tokens-limit": number;
  "reading-rate"?: number;
  "slo-ttft-ms"?: number;
  "slo-tbt-ms"?: number;
  "shutdown-grace-s": number;
}

export async function serve(flags: ServeOptions, load: () => Promise<OpenModel>): Promise<void> {
  const state: ServerState = { engine: { status: "loading" }, draining: false };
  const metrics = new ServerMetrics();
  const app = createApp(state, {
    modelId: flags.model,
    apiKey: flags["api-key"],
    maxQueue: flags["max-queue"],
    maxBodyBytes: flags["max-body-kb"] * 1024,
    maxTokensLimit: flags["max-tokens-limit"],
    defaultReadingRate: flags["reading-rate"],
    defaultSloTtftMs: flags["slo-ttft-ms"],
    defaultSloTbtMs: flags["slo-tbt-ms"],
  }, metrics);

  const server = Deno.serve({
    hostname: flags.host,
    port: flags.port,
    onListen: ({ hostname, port }) =>
      console.error(`sluice: listening on http://${hostname}:${port}`),
  }, app.fetch);

  let model: OpenModel | null = null;
  const shutdown = async (signal: string) => {
    if (state.draining) return;
    state.draining = true;
    console.error(`sluice: ${signal}: draining (up to ${flags["shutdown-grace-s"]} s)`);
    const deadline = performance.now() + flags["shutdown-grace-s"] * 1000;
    model?.runtime.drain();
    while (model && performance.now() < deadline) {
      if (model.runtime.openRequests === 0 && metrics.openStreams === 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await model?.runtime.close(); // ends whatever is still running or buffered
    await server.shutdown();
    console.error("sluice: stopped");
    Deno.exit(0);
  };
  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    Deno.addSignalListener(sig, () => void shutdown(sig));
  }

  try {
    model = await load();
    state.engine = { status: "ready", runtime: model.runtime, tokenizer: model.tokenizer };
    console.error(
      `sluice: ready at http://${flags.host}:${server.addr.port} (model '${flags.model}')`,
    );
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    state.engine = { status: "failed", error: message };
    console.error(`sluice: model failed to load: ${message}`);
  }
  await server.finished;
}
