// The Engine facade: loads a model onto the GPU and runs the step loop. The server talks to this
// file only. Requests go in with submit(); their tokens come out as async iterables.

import { type Gpu, openGpu } from "./gpu/device.ts";
import { BlockPool } from "./kv/block_pool.ts";
import { DeviceKv } from "./kv/device_kv.ts";
import type { LlamaConfig } from "./model/config.ts";
import { LlamaForward, type SampleRecord } from "./model/forward.ts";
import { openModelDir } from "./model/model_dir.ts";
import { Tokenizer } from "./model/tokenizer.ts";
import { resolveModel } from "./model/hub.ts";
import { progressBar } from "./util/progress.ts";
import { type LoadProgress, loadWeights, type ModelWeights } from "./model/weights.ts";
import { Scheduler } from "./sched/scheduler.ts";
import {
  type FinishInfo,
  type GenerateRequest,
  Sequence,
  type TokenEvent,
} from "./sched/sequence.ts";

export type { FinishInfo, GenerateRequest, TokenEvent };
export type { SamplingParams } from "./model/forward.ts";
export { StreamDecoder, Tokenizer } from "./model/tokenizer.ts";
export { DEFAULT_MODEL, resolveModel } from "./model/hub.ts";

export interface EngineOptions {
  /** A local model directory (resolve hub ids and "demo" before calling). */
  modelDir: string;
  /** Device KV budget in MiB; default: what the adapter's limits and 1/4 of maxBufferSize allow. */
  gpuKvMb?: number;
  maxSlots?: number;
  /** Token rows per step (prefill chunk plus decode rows). */
  maxRows?: number;
  blockSize?: number;
  maxTopLogprobs?: number;
  /** Steps in flight before the oldest readback is awaited. */
  readbackLag?: number;
  forceF32?: boolean;
  onLoadProgress?: LoadProgress;
  gpu?: Gpu;
}

/** Resolves `model` (directory, hub id or "demo"), loads it with a progress bar, logs a summary. */
export async function openEngine(
  model: string,
  opts: Omit<EngineOptions, "modelDir">,
  log: (msg: string) => void = (m) => console.error(m),
): Promise<Engine> {
  const dir = await resolveModel(model, log);
  const engine = await Engine.load({
    ...opts,
    modelDir: dir,
    onLoadProgress: opts.onLoadProgress ?? progressBar("loading weights"),
  });
  const i = engine.info;
  const mib = (b: number) => (b / 2 ** 20).toFixed(1);
  log(
    `sluice: model ${dir} on ${i.adapter} (${i.dtype}); weights ${mib(i.weightBytes)} MiB, KV ${
      mib(i.kvBytes)
    } MiB ` +
      `(${i.kvBlocksPerLayer} blocks × ${i.blockSize} tokens per layer), context ${i.maxContext}, batch ${i.maxSlots}`,
  );
  return engine;
}

export interface RequestHandle {
  id: number;
  events: AsyncIterable<TokenEvent>;
  done: Promise<FinishInfo>;
}

export interface EngineInfo {
  adapter: string;
  dtype: "f16" | "f32";
  weightBytes: number;
  kvBytes: number;
  kvBlocksPerLayer: number;
  blockSize: number;
  maxSlots: number;
  maxContext: number;
}

export interface EngineStats {
  waiting: number;
  running: number;
  kvBlocksUsed: number;
  kvBlocksTotal: number;
  steps: number;
  tokensGenerated: number;
  lastStepMs: number;
}

export class Engine {
  private scheduler: Scheduler;
  private nextId = 1;
  private wake: (() => void) | null = null;
  private loop: Promise<void>;
  private closed = false;
  private stepCount = 0;
  private tokenCount = 0;
  private lastStepMs = 0;
  /** Step durations not yet collected by takeStepTimes (bounded, oldest dropped). */
  private stepTimes: number[] = [];

  private constructor(
    readonly gpu: Gpu,
    readonly config: LlamaConfig,
    readonly tokenizer: Tokenizer,
    private weights: ModelWeights,
    private kv: DeviceKv,
    private pool: BlockPool,
    private forward: LlamaForward,
    private readonly readbackLag: number,
    readonly info: EngineInfo,
  ) {
    this.scheduler = new Scheduler(pool, kv, {
      maxSlots: forward.limits.maxSlots,
      maxRows: forward.limits.maxRows,
      numLayers: config.numLayers,
    }, (slot, p) => forward.setSampling(slot, p));
    this.loop = this.run();
  }

  static async load(opts: EngineOptions): Promise<Engine> {
    const files = await openModelDir(opts.modelDir);
    const tokenizer = new Tokenizer(files);
    const gpu = opts.gpu ?? await openGpu({ forceF32: opts.forceF32 });
    const cfg = files.config;
    const maxSlots = opts.maxSlots ?? 32;
    const maxRows = Math.max(opts.maxRows ?? 128, maxSlots);
    const ringSize = (opts.readbackLag ?? 3) + 1;
    const weights = await loadWeights(gpu, files, opts.onLoadProgress);
    const budget = opts.gpuKvMb !== undefined
      ? opts.gpuKvMb * 2 ** 20
      : Math.min(gpu.maxBufferSize / 4, 8 * gpu.maxBinding);
    const layout = DeviceKv.layoutForBudget(
      gpu,
      { numLayers: cfg.numLayers, numKvHeads: cfg.numKvHeads, headDim: cfg.headDim },
      budget,
      maxSlots,
      cfg.maxPositionEmbeddings,
      opts.blockSize ?? 16,
    );
    const kv = new DeviceKv(gpu, layout);
    const pool = new BlockPool(cfg.numLayers, layout.numBlocks);
    const forward = new LlamaForward(gpu, cfg, weights, kv, {
      maxRows,
      maxSlots,
      maxTopLogprobs: opts.maxTopLogprobs ?? 20,
      ringSize,
    });
    const info: EngineInfo = {
      adapter: gpu.adapterName,
      dtype: gpu.f16 ? "f16" : "f32",
      weightBytes: weights.bytes,
      kvBytes: kv.bytes,
      kvBlocksPerLayer: layout.numBlocks,
      blockSize: layout.blockSize,
      maxSlots,
      maxContext: Math.min(
        cfg.maxPositionEmbeddings,
        layout.maxBlocksPerSeq * layout.blockSize,
        layout.numBlocks * layout.blockSize,
      ),
    };
    const engine = new Engine(gpu, cfg, tokenizer, weights, kv, pool, forward, ringSize - 1, info);
    await engine.warmUp();
    return engine;
  }

  /**
   * Runs small batches of 1, 4, 8 and 16 requests (the matmul's row tiles) with and without
   * logprobs, so shader compilation is paid at load, not by the first clients.
   */
  private async warmUp(): Promise<void> {
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    for (const n of [1, 4, 8, 16].filter((n) => n <= this.info.maxSlots)) {
      const handles = Array.from(
        { length: n },
        (_, i) =>
          this.submit({
            ids: [i],
            maxTokens: 2,
            sampling: greedy,
            stopIds: [],
            topLogprobs: i === 0 ? 1 : 0,
          }),
      );
      await Promise.all(handles.map(async (h) => {
        for await (const _ of h.events);
        await h.done;
      }));
    }
    this.stepCount = 0;
    this.tokenCount = 0;
    this.stepTimes = [];
  }

  /** Compute dispatches recorded per step (for benchmarks). */
  get dispatchesPerStep(): number {
    return this.forward.dispatchesPerStep;
  }

  get maxTopLogprobs(): number {
    return this.forward.limits.maxTopLogprobs;
  }

  /** Validates and queues a request. Throws (synchronously) on requests that can never run. */
  submit(req: GenerateRequest): RequestHandle {
    if (this.closed) throw new Error("engine is shut down");
    const vocab = this.config.vocabSize;
    if (req.ids.length === 0) throw new RangeError("prompt is empty");
    const bad = req.ids.find((id) => !Number.isInteger(id) || id < 0 || id >= vocab);
    if (bad !== undefined) {
      throw new RangeError(`token id ${bad} is outside the vocabulary (0..${vocab - 1})`);
    }
    if (!Number.isInteger(req.maxTokens) || req.maxTokens < 0) {
      throw new RangeError("maxTokens must be a non-negative integer");
    }
    if (req.ids.length + req.maxTokens > this.info.maxContext) {
      throw new RangeError(
        `prompt (${req.ids.length} tokens) plus max tokens (${req.maxTokens}) exceeds the context limit of ${this.info.maxContext}`,
      );
    }
    if ((req.topLogprobs ?? 0) > this.maxTopLogprobs) {
      throw new RangeError(`top logprobs is at most ${this.maxTopLogprobs}`);
    }
    const stopIds = new Set(req.stopIds ?? this.tokenizer.eosTokenIds);
    const seq = new Sequence(this.nextId++, req, stopIds);
    if (req.signal) {
      if (req.signal.aborted) seq.cancelled = true;
      else {req.signal.addEventListener("abort", () => {
          seq.cancelled = true;
          this.kick();
        }, { once: true });}
    }
    this.scheduler.enqueue(seq);
    this.kick();
    return { id: seq.id, events: seq.events, done: seq.done };
  }

  stats(): EngineStats {
    let used = 0;
    for (let l = 0; l < this.config.numLayers; l++) used += this.pool.used(l);
    return {
      waiting: this.scheduler.waiting.length,
      running: this.scheduler.running.length,
      kvBlocksUsed: used,
      kvBlocksTotal: this.info.kvBlocksPerLayer * this.config.numLayers,
      steps: this.stepCount,
      tokensGenerated: this.tokenCount,
      lastStepMs: this.lastStepMs,
    };
  }

  /** Step durations (ms) since the last call, for the metrics histogram. */
  takeStepTimes(): number[] {
    const t = this.stepTimes;
    this.stepTimes = [];
    return t;
  }

  /** Stops accepting work, ends every request, waits for the loop, and frees GPU memory. */
  async close(): Promise<void> {
    this.closed = true;
    for (const seq of [...this.scheduler.waiting, ...this.scheduler.running]) seq.cancelled = true;
    this.kick();
    await this.loop;
    await this.forward.idle();
    this.kv.destroy();
  }

  private kick(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  private async run(): Promise<void> {
    const inflight: { records: Promise<SampleRecord[]>; owners: Sequence[] }[] = [];
    const drainOldest = async () => {
      const step = inflight.shift()!;
      const records = await step.records;
      this.scheduler.deliver(step.owners, records);
      this.tokenCount += records.length;
    };
    while (true) {
      try {
        this.scheduler.reap();
        if (this.closed && !this.scheduler.hasWork && inflight.length === 0) return;
        this.scheduler.admit();
        this.scheduler.finishZeroTokenPrefills();
        const step = this.scheduler.buildStep();
        if (step) {
          const t0 = performance.now();
          const records = this.forward.submit(step.plan);
          records.catch(() => {}); // awaited below; this only keeps a dropped one from being "unhandled"
          inflight.push({ records, owners: step.owners });
          this.stepCount++;
          if (inflight.length > this.readbackLag) await drainOldest();
          this.lastStepMs = performance.now() - t0;
          if (this.stepTimes.length < 4096) this.stepTimes.push(this.lastStepMs);
        } else if (inflight.length > 0) {
          await drainOldest();
        } else {
          await new Promise<void>((resolve) => this.wake = resolve);
        }
      } catch (err) {
        // A failed step fails the requests it could have touched; the loop itself keeps serving.
        const message = err instanceof Error ? err.message : String(err);
        console.error("sluice: engine step failed:", message);
        inflight.length = 0;
        this.scheduler.failAll(message);
      }
    }
  }
}
