// The server tests' fixture: the real HTTP server on a free loopback port over a generated tiny
// model (its tokenizer and chat template), behind the same front door (server/connections/) as
// `serve`. By default the runtime runs over the fake engine (tests/helpers/fake_engine.ts: no GPU,
// a toy model that honours token masks), since most server tests are about HTTP, validation,
// streaming or the agent API; `gpu: true` loads the tiny model on the GPU in-process, for tests
// whose subject is tokens, logits or the engine, and `worker: true` opens it as `serve` does, with
// the engine in a Worker. Also: SSE and /metrics readers.

import OpenAI from "openai";
import { Engine, type StepEngine } from "../../engine/engine.ts";
import { openModelDir } from "../../engine/formats/open_model.ts";
import { PromptEncoder, type PromptEncoderOptions } from "../../engine/text/prompt_encoder.ts";
import { Tokenizer } from "../../engine/text/tokenizer.ts";
import { writeTinyModel } from "../../engine/sources/tiny_model.ts";
import { openRuntime } from "../../runtime/open.ts";
import { Runtime, type RuntimeOptions } from "../../runtime/service.ts";
import { createApp, doorAnswers, type ServerConfig } from "../../server/app.ts";
import { FrontDoor, type FrontDoorOptions } from "../../server/connections/front_door.ts";
import { MAX_HEAD_BYTES } from "../../server/middleware/header_limit.ts";
import { parsePrometheusText, type Sample } from "../../server/metrics/parse.ts";
import { ServerMetrics } from "../../server/metrics/server_metrics.ts";
import { shutdown } from "../../server/shutdown.ts";
import type { ServerState } from "../../server/state/server_state.ts";
import { assert, assertEquals, assertMatch } from "../helpers/testing.ts";
import { testGpu } from "../helpers/gpu.ts";
import { FakeEngine } from "../../sim/fake_engine.ts";
import { chatModel, type ChatParts, type LoadedModel } from "../../runtime/model_router.ts";
import { entry, loadedRouter } from "../helpers/model_router.ts";
import { ModelRouter } from "../../runtime/model_router.ts";

export const MODEL_ID = "tiny-test";

export const TINY_SPEC = {
  hiddenSize: 64,
  intermediateSize: 128,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  tied: true,
  dtype: "F16",
  seed: 11,
} as const;

export interface EngineSetup {
  maxSlots?: number;
  maxRows?: number;
  gpuKvMb?: number;
}

export interface TestServerOptions {
  config?: Partial<ServerConfig>;
  engine?: EngineSetup;
  runtime?: Partial<Omit<RuntimeOptions, "eosIds">>;
  /** Wraps the in-process engine (to inject step failures). */
  wrapEngine?: (engine: StepEngine) => StepEngine;
  /** Load the tiny model on the GPU (in-process) instead of running the fake engine. */
  gpu?: boolean;
  /** Open the runtime with the engine in a Worker, as `serve` does (the GPU's engine). */
  worker?: boolean;
  /** Connection limits and timeouts (defaults: serve's). */
  connections?: Partial<FrontDoorOptions>;
  /** Which prompts are encoded off the HTTP thread (default: as `serve` does). */
  prompts?: PromptEncoderOptions;
  /** The model's chat_template in place of the tiny model's ChatML one. */
  chatTemplate?: string;
  /** More models beside MODEL_ID, loaded (embedding and reranking models: fake_embedder.ts). */
  scorers?: Record<string, LoadedModel>;
  /** Serve several models through a router instead (each a fake-engine runtime per load). */
  router?: RouterSetup;
}

export interface RouterSetup {
  ids: string[];
  keepAliveMs?: number;
  maxLoaded?: number;
  pinned?: string[];
  deviceBudgetBytes?: number;
  /** Each model's weights on disk, and on the device once loaded (the budget's figures). */
  sizeBytes?: number;
  deviceBytes?: number;
  /** Awaited inside each load (to hold a model in "loading"). */
  loadDelay?: () => Promise<void>;
  /** Opens a model itself (real models) instead of a fake-engine runtime. */
  open?: (id: string) => Promise<LoadedModel>;
}

export interface TestServer {
  url: string;
  runtime: Runtime;
  /** The one model's parts (the router holds it as MODEL_ID); with `router`, unset (as `runtime`). */
  model: ChatParts;
  /** With `router`: the ids loaded, in order, once per load. */
  opens: string[];
  state: ServerState;
  metrics: ServerMetrics;
  server: FrontDoor;
  client: OpenAI;
  post(path: string, body: unknown, init?: RequestInit): Promise<Response>;
  /** GET /metrics, parsed. */
  scrape(): Promise<Map<string, Sample[]>>;
  /** Shuts down with no grace (if the test has not) and removes the model. */
  close(): Promise<void>;
}

export async function startServer(opts: TestServerOptions = {}): Promise<TestServer> {
  const dir = await Deno.makeTempDir({ prefix: "sluice-server-" });
  await writeTinyModel(dir, TINY_SPEC);
  if (opts.chatTemplate !== undefined) {
    const path = `${dir}/tokenizer_config.json`;
    const config = JSON.parse(await Deno.readTextFile(path));
    await Deno.writeTextFile(path, JSON.stringify({ ...config, chat_template: opts.chatTemplate }));
  }
  const engineSetup = { gpuKvMb: 8, maxSlots: 16, maxRows: 64, ...opts.engine };
  const runtimeOptions: Omit<RuntimeOptions, "eosIds"> = {
    policy: "fcfs",
    maxQueue: 64,
    maxTokensLimit: 512,
    ...opts.runtime,
  };
  const openChat = async (): Promise<ChatParts> => {
    let runtime: Runtime;
    let tokenizer: Tokenizer;
    let prompts: PromptEncoder;
    if (opts.worker) {
      ({ runtime, tokenizer, prompts } = await openRuntime(
        dir,
        {
          engine: { ...engineSetup, skipWarmUp: true },
          runtime: runtimeOptions,
          inProcess: false,
          prompts: opts.prompts,
        },
        () => {},
      ));
    } else {
      const files = await openModelDir(dir);
      tokenizer = new Tokenizer(files);
      prompts = new PromptEncoder(tokenizer, files, opts.prompts);
      const engine = opts.gpu
        ? await Engine.load({
          modelDir: dir,
          gpu: await testGpu(),
          skipWarmUp: true,
          ...engineSetup,
        })
        : fakeEngine(files.config.vocabSize, files.config.maxPositionEmbeddings, engineSetup);
      runtime = new Runtime(opts.wrapEngine?.(engine) ?? engine, {
        ...runtimeOptions,
        eosIds: tokenizer.eosTokenIds,
        vocabulary: () => tokenizer.vocabulary(),
      });
    }
    return { runtime, tokenizer, prompts };
  };
  const opens: string[] = [];
  let model: ChatParts;
  let models: ModelRouter;
  if (opts.router) {
    // Several fake-engine models, each load a new runtime over the tiny model; nothing loaded yet.
    const r = opts.router;
    model = undefined as unknown as ChatParts;
    models = new ModelRouter(r.ids.map((id) => ({ ...entry(id, r.sizeBytes ?? 0) })), {
      open: async (e) => {
        opens.push(e.id);
        await r.loadDelay?.();
        if (r.open) return r.open(e.id);
        return chatModel(await openChat(), r.deviceBytes ? { deviceBytes: r.deviceBytes } : {});
      },
      keepAliveMs: r.keepAliveMs ?? Infinity,
      maxLoaded: r.maxLoaded ?? r.ids.length,
      deviceBudgetBytes: r.deviceBudgetBytes ?? null,
      extraDeviceBytes: 0,
      pinned: r.pinned ?? [],
      pollMs: 10,
    });
  } else {
    model = await openChat();
    models = await loadedRouter({ [MODEL_ID]: chatModel(model), ...opts.scorers });
  }
  const runtime = model?.runtime;
  const state: ServerState = { model: { status: "ready" }, models, draining: false };
  const metrics = new ServerMetrics(MODEL_ID);
  const config = { maxBodyBytes: 64 * 1024, ...opts.config };
  const app = createApp(state, config, metrics);
  const server = new FrontDoor(app.fetch, {
    hostname: "127.0.0.1",
    port: 0,
    maxConnections: 256,
    headerTimeoutMs: 10_000,
    keepAliveTimeoutMs: 5_000,
    maxHeadBytes: MAX_HEAD_BYTES,
    onConnectionEvent: (event) => metrics.connectionEvent(event),
    answerHere: doorAnswers(state, config),
    ...opts.connections,
  });
  const url = `http://127.0.0.1:${server.addr.port}`;
  const auth: Record<string, string> = config.apiKey
    ? { authorization: `Bearer ${config.apiKey}` }
    : {};
  return {
    url,
    runtime,
    model,
    opens,
    state,
    metrics,
    server,
    client: new OpenAI({ baseURL: `${url}/v1`, apiKey: config.apiKey ?? "none", maxRetries: 0 }),
    post: (path, body, init = {}) =>
      fetch(url + path, {
        method: "POST",
        ...init,
        headers: { "content-type": "application/json", ...auth, ...init.headers },
        body: typeof body === "string" ? body : JSON.stringify(body),
      }),
    scrape: async () => parsePrometheusText(await (await fetch(url + "/metrics")).text()),
    close: async () => {
      if (!state.draining) await shutdown(state, metrics, server, 0);
      await server.finished;
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** How long the fake engine's steps take. */
const FAKE_STEP_MS = 3;

/**
 * The fake engine shaped as Engine.load shapes the tiny model: its vocabulary and context, blocks of
 * 16 positions at the 2 KiB a block of its f16 KV takes, the setup's slots, rows and KV megabytes,
 * 20 top logprobs, and greedy tokens that do not depend on the seed.
 */
function fakeEngine(vocabSize: number, maxContext: number, setup: Required<EngineSetup>) {
  const blockSize = 16;
  const maxBlocksPerSeq = Math.ceil(maxContext / blockSize);
  // Each step's tokens come back a few milliseconds later, about what the tiny model's step costs
  // on lavapipe: clients can leave mid-stream, queues fill and pool pressure builds, as they do
  // on the GPU.
  const stepDelay = () => new Promise<void>((resolve) => setTimeout(resolve, FAKE_STEP_MS));
  return new FakeEngine({
    vocabSize,
    numLayers: TINY_SPEC.numLayers,
    blockSize,
    blocksPerArena: [Math.floor(setup.gpuKvMb * 1024 * 1024 / 2048) - 8],
    maxBlocksPerSeq,
    maxSlots: setup.maxSlots,
    maxRows: setup.maxRows,
    maxTopLogprobs: 20,
    ringSize: 2,
    greedyIgnoresSeed: true,
  }, stepDelay);
}

/** Reads a whole SSE response into its data payloads, checking the framing of every event. */
export async function sseData(res: Response): Promise<string[]> {
  assertEquals(res.headers.get("content-type"), "text/event-stream");
  return sseEvents(await res.text());
}

/** Splits SSE text into its data payloads; comment lines (keep-alives) carry none. */
export function sseEvents(text: string): string[] {
  assert(text === "" || text.endsWith("\n\n"), "a stream ends with a blank line");
  return text.split("\n\n").filter((e) => e.length > 0 && !e.startsWith(":")).map((e) => {
    assertMatch(e, /^data: /);
    return e.slice("data: ".length);
  });
}

/** Reads a whole SSE response of named events (Responses and Messages APIs): `event:` and `data:`. */
export async function namedSseEvents(res: Response): Promise<{ event: string; data: any }[]> {
  assertEquals(res.headers.get("content-type"), "text/event-stream");
  const text = await res.text();
  assert(text.endsWith("\n\n"), "a stream ends with a blank line");
  return text.split("\n\n").filter((e) => e.length > 0 && !e.startsWith(":")).map((e) => {
    const m = /^event: (\S+)\ndata: (.*)$/s.exec(e);
    assert(m, `not a named event: ${e}`);
    return { event: m[1], data: JSON.parse(m[2]) };
  });
}

/** Reads an SSE body incrementally: events as they arrive, then the rest. */
export class SseReader {
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  private readonly decoder = new TextDecoder();
  private buffered = "";

  constructor(res: Response) {
    this.reader = res.body!.getReader();
  }

  /** The next event's data, or null once the stream has ended. */
  async next(): Promise<string | null> {
    for (;;) {
      const end = this.buffered.indexOf("\n\n");
      if (end >= 0) {
        const event = this.buffered.slice(0, end + 2);
        this.buffered = this.buffered.slice(end + 2);
        if (event.startsWith(":")) continue; // a keep-alive comment
        return sseEvents(event)[0];
      }
      const { done, value } = await this.reader.read();
      if (done) return null;
      this.buffered += this.decoder.decode(value, { stream: true });
    }
  }

  /** Every event left, until the stream ends. */
  async rest(): Promise<string[]> {
    const out: string[] = [];
    for (let e = await this.next(); e !== null; e = await this.next()) out.push(e);
    return out;
  }

  cancel(): Promise<void> {
    return this.reader.cancel();
  }
}

/** Polls `check` every 25 ms until it holds; fails with `what` after `timeoutMs`. */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
