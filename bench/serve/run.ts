// Runs one configuration: start its server, learn the model's limits, warm up, replay the workload
// with one client per request at its arrival time while scraping /metrics, stop the server.
// Bounded everywhere: the workload's length, each request's timeout, the whole-run deadline and the
// server's start timeout; the server is stopped in `finally` whatever happens.

import { runClient } from "./client.ts";
import { getText } from "./http.ts";
import type { LoopbackTarget } from "./loopback.ts";
import { type RunSummary, summarize } from "./metrics.ts";
import { MetricsScraper, type Scrape } from "./prometheus.ts";
import type { RequestRecord } from "./record.ts";
import { type ServerMetricsSummary, summarizeServerMetrics } from "./server_metrics.ts";
import { startServer } from "./server_process.ts";
import {
  materialize,
  MAX_REQUESTS_CAP,
  type ModelLimits,
  type WorkloadRequest,
} from "./workload.ts";

export interface ConfigSpec {
  name: string;
  flags: string[];
}

export interface ModelInfo extends ModelLimits {
  id: string;
  /** True when the server did not report vocab_size and ids < 256 are used. */
  vocabGuessed: boolean;
}

/** Asks GET /v1/models for the served model's id and limits (vocab_size and max_model_len are
 * Sluice extension fields; absent ones fall back). */
export async function modelInfo(target: LoopbackTarget, fallbackId: string): Promise<ModelInfo> {
  let m: any;
  try {
    const { status, text } = await getText(target, "/v1/models", 5000);
    if (status === 200) m = JSON.parse(text)?.data?.[0];
  } catch { /* fall back below */ }
  const vocab = Number(m?.vocab_size);
  const ctx = Number(m?.max_model_len ?? m?.context_length);
  const vocabOk = Number.isInteger(vocab) && vocab > 0;
  return {
    id: typeof m?.id === "string" ? m.id : fallbackId,
    vocabSize: vocabOk ? vocab : 256,
    vocabGuessed: !vocabOk,
    ...(Number.isInteger(ctx) && ctx > 1 ? { maxContext: ctx } : {}),
  };
}

export interface ReplayOptions {
  model: ModelInfo;
  requestTimeoutMs: number;
  /** From the start of the replay; requests not sent by then are recorded as timed out. */
  deadlineMs: number;
  scrapeIntervalMs: number;
}

export interface ReplayResult {
  records: RequestRecord[];
  scrapes: Scrape[];
  scrapeFailures: number;
}

export async function replay(
  target: LoopbackTarget,
  workload: WorkloadRequest[],
  o: ReplayOptions,
): Promise<ReplayResult> {
  if (workload.length > MAX_REQUESTS_CAP) {
    throw new Error(`workload of ${workload.length} requests exceeds ${MAX_REQUESTS_CAP}`);
  }
  // Prompts are built before the clock starts so building 8k-token prompts does not delay arrivals.
  const prompts = workload.map((w) => materialize(w, o.model));
  const deadline = new AbortController();
  const deadlineTimer = setTimeout(() => deadline.abort(new Error("run deadline")), o.deadlineMs);
  const runStart = performance.now();
  const scraper = new MetricsScraper(
    target,
    runStart,
    o.scrapeIntervalMs,
    Math.ceil(o.deadlineMs / o.scrapeIntervalMs) + 2,
  );
  await scraper.scrapeOnce();
  scraper.start();
  const pending: Promise<RequestRecord>[] = [];
  try {
    const order = workload.map((_, i) => i).sort((a, b) =>
      workload[a].arrivalS - workload[b].arrivalS
    );
    for (const i of order) {
      const w = workload[i];
      const due = runStart + w.arrivalS * 1000;
      await sleepUntil(due, deadline.signal);
      if (deadline.signal.aborted) {
        const at = performance.now() - runStart;
        pending.push(Promise.resolve(notSent(w, prompts[i].maxTokens, at)));
        continue;
      }
      pending.push(runClient(target, w, prompts[i], {
        model: o.model.id,
        timeoutMs: o.requestTimeoutMs,
        signal: deadline.signal,
        runStartMs: runStart,
      }));
    }
    const records = await Promise.all(pending);
    return {
      records: records.sort((a, b) => a.id - b.id),
      scrapes: await scraper.stop(),
      scrapeFailures: scraper.failures,
    };
  } finally {
    clearTimeout(deadlineTimer);
    await scraper.stop();
  }
}

function notSent(w: WorkloadRequest, maxTokens: number, atMs: number): RequestRecord {
  return {
    id: w.id,
    outcome: "timeout",
    error: "not sent: run deadline",
    sentAtMs: atMs,
    endAtMs: atMs,
    arrivalsMs: [],
    displayMs: [],
    readingRate: w.readingRate,
    sloTtftMs: w.sloTtftMs,
    sloTbtMs: w.sloTbtMs,
    maxTokens,
  };
}

function sleepUntil(due: number, signal: AbortSignal): Promise<void> {
  const ms = due - performance.now();
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

export interface RunOptions {
  model: string;
  serverCommand: string[];
  cwd?: string;
  startTimeoutMs: number;
  requestTimeoutMs: number;
  deadlineMs: number;
  scrapeIntervalMs: number;
  warmupRequests: number;
  /** The server's stdout/stderr go here. */
  logPath?: string;
}

export interface ConfigResult {
  config: ConfigSpec;
  /** Set when the configuration could not be measured (server failed to start, ...). */
  error?: string;
  model?: ModelInfo;
  records: RequestRecord[];
  scrapes: Scrape[];
  scrapeFailures: number;
  summary: RunSummary | null;
  server: ServerMetricsSummary | null;
  warmupErrors: string[];
  wallS: number;
}

/** Sends small unrecorded requests so shader compilation and first-use costs stay out of TTFT. */
async function warmUp(
  target: LoopbackTarget,
  model: ModelInfo,
  n: number,
  timeoutMs: number,
): Promise<string[]> {
  const errors: string[] = [];
  for (let i = 0; i < n; i++) {
    const w: WorkloadRequest = {
      id: -1 - i,
      arrivalS: 0,
      promptIds: Array.from({ length: 8 }, (_, j) => (j * 31 + i) % model.vocabSize),
      outputLen: 4,
      readingRate: 1000,
      sloTtftMs: timeoutMs,
      sloTbtMs: timeoutMs,
    };
    const r = await runClient(target, w, materialize(w, model), {
      model: model.id,
      timeoutMs,
      runStartMs: 0,
    });
    if (r.outcome !== "ok") {
      errors.push(`warm-up ${i}: ${r.outcome}${r.error ? ` (${r.error})` : ""}`);
    }
  }
  return errors;
}

export async function runConfig(
  workload: WorkloadRequest[],
  config: ConfigSpec,
  o: RunOptions,
): Promise<ConfigResult> {
  const t0 = performance.now();
  const result: ConfigResult = {
    config,
    records: [],
    scrapes: [],
    scrapeFailures: 0,
    summary: null,
    server: null,
    warmupErrors: [],
    wallS: 0,
  };
  let server;
  try {
    server = await startServer({
      command: o.serverCommand,
      model: o.model,
      flags: config.flags,
      cwd: o.cwd,
      startTimeoutMs: o.startTimeoutMs,
      logPath: o.logPath,
    });
    result.model = await modelInfo(server.target, o.model);
    result.warmupErrors = await warmUp(
      server.target,
      result.model,
      o.warmupRequests,
      o.requestTimeoutMs,
    );
    const r = await replay(server.target, workload, {
      model: result.model,
      requestTimeoutMs: o.requestTimeoutMs,
      deadlineMs: o.deadlineMs,
      scrapeIntervalMs: o.scrapeIntervalMs,
    });
    Object.assign(result, r);
    result.summary = summarize(r.records);
    result.server = summarizeServerMetrics(r.scrapes);
  } catch (e) {
    result.error = e instanceof Error ? e.message : String(e);
  } finally {
    await server?.stop();
    result.wallS = (performance.now() - t0) / 1000;
  }
  return result;
}
