// The engine: a model on the GPU that runs the step plans it is given. It owns the device, the
// weights, the kernels and the KV memory, and knows nothing of requests, queues or time: the
// runtime decides what each step holds (rows, samples, block-table and sampling updates).
//
// The same interface (StepEngine) is served in-process (tests, `generate`) or from a Worker
// (engine/worker.ts, for `serve`), so the GPU loop never runs on the thread that serves HTTP.

import { type Gpu, openGpu } from "./gpu/device.ts";
import { DeviceKv, type TableWrite } from "./kv/device_kv.ts";
import { NOT_RESIDENT } from "./kv/block_pool.ts";
import type { LlamaConfig } from "./model/config.ts";
import { LlamaForward, type SampleRecord, type SamplingParams } from "./model/forward.ts";
import type { StepRow, StepSample } from "./model/forward.ts";
import { openModelDir } from "./model/model_dir.ts";
import { type LoadProgress, loadWeights } from "./model/weights.ts";

export type { SampleRecord, SamplingParams, StepRow, StepSample, TableWrite };

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
  /** Readback buffers: steps that may be in flight at once. */
  ringSize?: number;
  forceF32?: boolean;
  /** Host KV tier budget in MiB (0: no host tier). */
  hostKvMb?: number;
  /** Skip the warm-up steps that compile shaders at load (tests that time nothing). */
  skipWarmUp?: boolean;
  onLoadProgress?: LoadProgress;
  gpu?: Gpu;
}

/** What the runtime needs to know of the engine: limits, KV geometry, and labels for logs. */
export interface EngineInfo {
  adapter: string;
  dtype: "f16" | "f32";
  weightBytes: number;
  kvBytes: number;
  numLayers: number;
  vocabSize: number;
  blockSize: number;
  blocksPerArena: number[];
  layerArena: number[];
  maxBlocksPerSeq: number;
  maxSlots: number;
  maxRows: number;
  maxTopLogprobs: number;
  /** Longest prompt + output one request can have: positions, table width and pool size allow. */
  maxContext: number;
  /** Steps the readback ring lets the runtime keep in flight. */
  ringSize: number;
  /** Blocks of the host KV tier (each holds one block of any layer, K and V); 0 without one. */
  hostBlocks: number;
  dispatchesPerStep: number;
}

/**
 * A copy of some of one layer's KV blocks between the device pool and the host tier. Block i of
 * `deviceBlocks` (in the layer's arena) pairs with block i of `hostBlocks`; runs that are
 * contiguous on both sides move as one copy (block groups).
 */
export interface KvCopy {
  /** "out": device → host (swap-out, write-through); "in": host → device (swap-in). */
  direction: "out" | "in";
  layer: number;
  deviceBlocks: number[];
  hostBlocks: number[];
}

/** One step: host-side updates to apply first, then the rows to run and the rows to sample. */
export interface StepPlan {
  /**
   * KV copies, before anything else in the step: every "out" copy is submitted first, so a device
   * block copied out may be reused by an "in" copy or the kernels of the same step. A step's
   * records resolve only once its "out" copies have landed in host memory.
   */
  copies?: KvCopy[];
  /** Block-table entries to upload before the step (new blocks, or a slot's new owner). */
  tables: TableWrite[];
  /** Sampling parameters of slots whose request changed. */
  sampling: { slot: number; params: SamplingParams }[];
  rows: StepRow[];
  samples: StepSample[];
  wantTopLogprobs: boolean;
}

/** The engine as the runtime sees it, in-process or behind a Worker. */
export interface StepEngine {
  readonly info: EngineInfo;
  /** Submits a step; resolves with its sample records once the GPU has finished it. */
  step(plan: StepPlan): Promise<SampleRecord[]>;
  /** Waits for submitted work, then frees every GPU object the engine made. */
  close(): Promise<void>;
}

export class Engine implements StepEngine {
  private closed = false;

  private constructor(
    readonly gpu: Gpu,
    readonly config: LlamaConfig,
    private readonly kv: DeviceKv,
    private readonly forward: LlamaForward,
    private readonly ownsGpu: boolean,
    private readonly release: () => void,
    readonly info: EngineInfo,
  ) {}

  static async load(opts: EngineOptions): Promise<Engine> {
    const files = await openModelDir(opts.modelDir);
    const gpu = opts.gpu ?? await openGpu({ forceF32: opts.forceF32 });
    const cfg = files.config;
    const maxSlots = opts.maxSlots ?? 32;
    const maxRows = Math.max(opts.maxRows ?? 128, maxSlots);
    // Two steps in flight: Deno resolves a readback only once the queue behind it has drained, so
    // deeper pipelines deliver tokens in bursts (a stream beside a long prefill waited 8.7 s
    // between tokens at 4, 1.7 s at 2) without more throughput (bench responsiveness).
    const ringSize = opts.ringSize ?? 2;
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
    const forward = new LlamaForward(gpu, cfg, weights, kv, {
      maxRows,
      maxSlots,
      maxTopLogprobs: opts.maxTopLogprobs ?? 20,
      ringSize,
    });
    // A request's KV must fit in the pool on every layer at once (no host tier yet).
    const layersPerArena = layout.blocksPerArena.map((_, a) =>
      layout.layerArena.filter((x) => x === a).length
    );
    const poolTokens = Math.min(
      ...layout.blocksPerArena.map((n, a) => Math.floor(n / layersPerArena[a])),
    ) * layout.blockSize;
    const info: EngineInfo = {
      adapter: gpu.adapterName,
      dtype: gpu.f16 ? "f16" : "f32",
      weightBytes: weights.bytes,
      kvBytes: kv.bytes,
      numLayers: cfg.numLayers,
      vocabSize: cfg.vocabSize,
      blockSize: layout.blockSize,
      blocksPerArena: [...layout.blocksPerArena],
      layerArena: [...layout.layerArena],
      maxBlocksPerSeq: layout.maxBlocksPerSeq,
      maxSlots,
      maxRows,
      maxTopLogprobs: forward.limits.maxTopLogprobs,
      maxContext: Math.min(
        cfg.maxPositionEmbeddings,
        layout.maxBlocksPerSeq * layout.blockSize,
        poolTokens,
      ),
      ringSize,
      hostBlocks: 0,
      dispatchesPerStep: forward.dispatchesPerStep,
    };
    const release = () => {
      forward.destroy();
      kv.destroy();
      destroyWeights(weights);
    };
    const engine = new Engine(gpu, cfg, kv, forward, !opts.gpu, release, info);
    if (!opts.skipWarmUp) await engine.warmUp();
    return engine;
  }

  step(plan: StepPlan): Promise<SampleRecord[]> {
    if (this.closed) return Promise.reject(new Error("engine is closed"));
    for (const t of plan.tables) this.kv.writeTable(t.slot, t.layer, t.blocks, t.first);
    for (const s of plan.sampling) this.forward.setSampling(s.slot, s.params);
    return this.forward.submit(plan);
  }

  /**
   * Runs steps of 1, 4, 8 and 16 rows (the matmul's row tiles) with and without top logprobs, so
   * shader compilation is paid at load, not by the first clients. Every slot points at block 0.
   */
  private async warmUp(): Promise<void> {
    const { maxSlots, numLayers } = this.info;
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    for (const n of [1, 4, 8, 16].filter((n) => n <= maxSlots)) {
      const tables: TableWrite[] = [];
      const sampling = [];
      for (let slot = 0; slot < n; slot++) {
        for (let layer = 0; layer < numLayers; layer++) {
          tables.push({ slot, layer, first: 0, blocks: [0] });
        }
        sampling.push({ slot, params: greedy });
      }
      const rows = Array.from({ length: n }, (_, slot) => ({ slot, pos: 0, token: slot }));
      const samples = rows.map((_, row) => ({ row }));
      await this.step({ tables, sampling, rows, samples, wantTopLogprobs: false });
      await this.step({ tables: [], sampling: [], rows, samples, wantTopLogprobs: true });
    }
    const clear = new Array(this.info.maxBlocksPerSeq).fill(NOT_RESIDENT);
    for (let slot = 0; slot < Math.min(16, maxSlots); slot++) {
      for (let layer = 0; layer < numLayers; layer++) this.kv.writeTable(slot, layer, clear);
    }
  }

  /** Reads the raw logits of the last step's sample rows (tests only: a synchronous round trip). */
  readLogits(samples: number): Promise<Float32Array[]> {
    return this.forward.readLogits(samples);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.forward.idle();
    this.release();
    if (this.ownsGpu) this.gpu.device.destroy();
  }
}

function destroyWeights(w: import("./model/weights.ts").ModelWeights): void {
  const seen = new Set<GPUBuffer>();
  const drop = (b: GPUBuffer) => {
    if (!seen.has(b)) seen.add(b), b.destroy();
  };
  const parts = (m: { parts: { buffer: GPUBuffer }[] }) => m.parts.forEach((p) => drop(p.buffer));
  parts(w.embed);
  parts(w.lmHead);
  drop(w.finalNorm);
  for (const l of w.layers) {
    drop(l.inputNorm);
    drop(l.postAttentionNorm);
    parts(l.qkv);
    parts(l.o);
    parts(l.gateUp);
    parts(l.down);
  }
}
