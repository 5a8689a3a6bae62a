// `sluice serve`: starts HTTP at once (health says "loading"), loads the start-up models (the first
// --model and the pinned ones; the others load when a request names them, through the model
// router), and on SIGINT or SIGTERM shuts down gracefully (server/shutdown.ts) within the grace
// period, then exits 0. A start-up load that fails closes the server and rejects with
// ModelLoadError: a server that can never become ready must not sit listening (the CLI exits 1
// with the message). The caller builds the router from the models it resolved before calling (so
// the port opens once the ids are known); the port is open while the weights load, so /health
// says "loading" rather than refusing connections.

import type { ServedModels } from "../runtime/served_models.ts";
import { createApp, doorAnswers } from "./app.ts";
import {
  connectionCapacity,
  descriptorLimit,
  openDescriptors,
} from "./connections/descriptor_limit.ts";
import { FrontDoor } from "./connections/front_door.ts";
import { MAX_HEAD_BYTES } from "./middleware/header_limit.ts";
import { ServerMetrics } from "./metrics/server_metrics.ts";
import { shutdown } from "./shutdown.ts";
import type { ServerState } from "./state/server_state.ts";

/** The model could not be loaded; the server has been closed. */
export class ModelLoadError extends Error {
  constructor(message: string) {
    super(`model failed to load: ${message}`);
    this.name = "ModelLoadError";
  }
}

/** The `serve` flags the server reads; the runtime's own (limits, defaults) go to `load`. */
export interface ServeOptions {
  host: string;
  port: number;
  "api-key"?: string;
  "max-body-kb": number;
  /** Extra Host names to answer to, and web origins that may call the API (comma lists, split). */
  "allowed-hosts"?: string[];
  "cors-origins"?: string[];
  "shutdown-grace-s": number;
  /** Connections admitted at once (default: what the descriptor limit allows). */
  "max-connections"?: number;
  "header-timeout-s": number;
  "keepalive-timeout-s": number;
  /** Require the API key on /metrics too (it is always required on /state). */
  "metrics-auth": "on" | "off";
  /** Seconds of silence after which a stream sends a keep-alive comment. */
  "sse-keepalive-s": number;
  /** "none": reasoning stays in the answer's text unless a request asks otherwise. */
  "reasoning-format": "auto" | "none";
}

export async function serve(flags: ServeOptions, models: ServedModels): Promise<void> {
  const { router } = models;
  const state: ServerState = { model: { status: "loading" }, models: router, draining: false };
  const metrics = new ServerMetrics(router.defaultId ?? "default");
  const config = {
    apiKey: flags["api-key"],
    maxBodyBytes: flags["max-body-kb"] * 1024,
    bindHost: flags.host,
    allowedHosts: flags["allowed-hosts"],
    corsOrigins: flags["cors-origins"],
    metricsAuth: flags["metrics-auth"] === "on",
    sseKeepAliveMs: flags["sse-keepalive-s"] * 1000,
    reasoningInline: flags["reasoning-format"] === "none",
  };
  const app = createApp(state, config, metrics);

  const limit = descriptorLimit();
  const maxConnections = flags["max-connections"] ?? connectionCapacity(limit, openDescriptors());
  if (limit) {
    console.error(
      `sluice: ${limit.soft} file descriptors; admitting up to ${maxConnections} connections`,
    );
  }
  const server = new FrontDoor(app.fetch, {
    hostname: flags.host,
    port: flags.port,
    maxConnections,
    headerTimeoutMs: flags["header-timeout-s"] * 1000,
    keepAliveTimeoutMs: flags["keepalive-timeout-s"] * 1000,
    maxHeadBytes: MAX_HEAD_BYTES,
    onListen: ({ hostname, port }) =>
      console.error(`sluice: listening on http://${hostname}:${port}`),
    onConnectionEvent: (event) => metrics.connectionEvent(event),
    answerHere: doorAnswers(state, config),
  });

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
    for (const id of models.preload) (await router.acquire(id)).release();
    await router.loadPinned();
    state.model = { status: "ready" };
    const ids = router.ids;
    console.error(
      `sluice: ready at http://${flags.host}:${server.addr.port} (${
        ids.length === 1 ? `model '${ids[0]}'` : `${ids.length} models, default '${ids[0]}'`
      })`,
    );
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    state.model = { status: "failed", error: message };
    await router.close();
    await server.shutdown();
    throw new ModelLoadError(message);
  }
  await server.finished;
}
