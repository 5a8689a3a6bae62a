// The engine: a model on the GPU that runs the step plans it is given. It owns the device, the
// weights, the kernels and the KV memory, and knows nothing of requests, queues or time: the
// runtime decides what each step holds (rows, samples, block-table and sampling updates).
//
// The same interface (StepEngine) is served in-process (tests, `generate`) or from a Worker
// (engine/worker.ts, for `serve`), so the GPU loop never runs on the thread that serves HTTP.

import { type Gpu, type KvDtype, kvDtypeOf, openGpu, withKvDtype } from "./gpu/device.ts";
import { DeviceKv, type TableWrite } from "./kv/device_kv.ts";
import { blocksPerLayer, NOT_RESIDENT } from "./kv/pool_shape.ts";
import { HostKv } from "./kv/host_kv.ts";
import type { KvCopy, KvPrefetch } from "./kv/kv_copies.ts";
import { type KvCopyStats, KvTransfers } from "./kv/kv_transfers.ts";
import type { CostModel } from "./kv/cost_model.ts";
import {
  measureOverlap,
  type OverlapMeasurement,
  profileCosts,
  type ProfileOptions,
  type ProfileTarget,
} from "./kv/cost_profile.ts";
import type { Architecture, LlamaConfig } from "./model/config.ts";
import { LlamaForward } from "./forward/forward.ts";
import type { SampleRecord, SamplingParams } from "./gpu/kernels/sample.ts";
import type { DecodeGroup, StepMask, StepRow, StepSample } from "./forward/step.ts";
import type { PenaltySeed } from "./forward/sampling_controls.ts";
import { usesPenalties } from "./gpu/kernels/logit_controls.ts";
import { openModelDir } from "./formats/open_model.ts";
import type { LoadProgress } from "./weights/upload.ts";
import { loadWeights } from "./weights/load_weights.ts";
import {
  calibrationShapes,
  chooseMatmulLayout,
  loadedShapes,
  type MatmulChoice,
  type MatmulKernelFlag,
} from "./forward/matmul_choice.ts";
import { weightsToTextures } from "./weights/texture_parts.ts";
import type { MatrixPart, ModelWeights } from "./weights/model_weights.ts";

export type {
  CostModel,
  DecodeGroup,
  KvCopy,
  KvCopyStats,
  KvPrefetch,
  OverlapMeasurement,
  PenaltySeed,
  SampleRecord,
  SamplingParams,
  StepMask,
  StepRow,
  StepSample,
  TableWrite,
};

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
  /** Most decode steps one submission may run (StepPlan.group); default 1, no groups. */
  maxDecodeSteps?: number;
  forceF32?: boolean;
  /** KV cache dtype; default: the weights' (f16 where the adapter has shader-f16). */
  kvDtype?: KvDtype;
  /** Host KV tier budget in MiB (0: no host tier). */
  hostKvMb?: number;
  /** false: one copy per KV block instead of per contiguous run (the kv benchmark's baseline). */
  coalesceCopies?: boolean;
  /**
   * Where float weights live and so which matmul kernel reads them (forward/matmul_choice.ts):
   * "auto" times both at first start and caches the winner per adapter and model shape. Default:
   * "storage". A GGUF model is loaded into storage buffers, timed on its own formats, and moved
   * into textures where they win (weights/texture_parts.ts).
   */
  matmulKernel?: MatmulKernelFlag;
  /** Skip the warm-up steps that compile shaders, and the cost profile, at load (tests). */
  skipWarmUp?: boolean;
  /**
   * Profile step and copy costs at load (about 1 s on the demo model). Default: only with a host
   * KV tier, since the cost model prices copies between the tiers.
   */
  profileCosts?: boolean;
  onLoadProgress?: LoadProgress;
  gpu?: Gpu;
}

/** What the runtime needs to know of the engine: limits, KV geometry, and labels for logs. */
export interface EngineInfo {
  /** The model's family (config.json's model_type), for logs and the engine's description. */
  architecture: Architecture;
  /** Positions a row attends to (Mistral's sliding window), or null: all before it. */
  slidingWindow: number | null;
  adapter: string;
  dtype: "f16" | "f32";
  /** How the KV cache stores K and V (absent in test fakes: as the weights). */
  kvDtype?: KvDtype;
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
  /** Most steps of one decode group (StepPlan.group); 1: the engine runs no groups. */
  maxDecodeSteps: number;
  /** Blocks of the host KV tier (each holds one block of any layer, K and V); 0 without one. */
  hostBlocks: number;
  /** Bytes of one KV block of one layer, K and V together (what a copy moves per block). */
  kvBlockBytes: number;
  dispatchesPerStep: number;
  /** Where the float weights live, and whether a flag, the cache or a measurement said so. */
  matmulKernel?: MatmulChoice;
  /** Step and copy costs profiled at load; absent when the load skipped warm-up. */
  costModel?: CostModel;
}

/** One step: host-side updates to apply first, then the rows to run and the rows to sample. */
export interface StepPlan {
  /**
   * KV copies, before anything else in the step: every "out" copy is submitted first, so a device
   * block copied out may be reused by an "in" copy or the kernels of the same step. A step's
   * records resolve only once its "out" copies have landed in host memory. "In" copies read host
   * memory when step() is called, and the queue orders them before this step's kernels: a request
   * may run in the step that brings it in, and its host blocks may be rewritten once step()
   * returns. An "in" copy from a host block whose "out" copy has not landed is refused. A step
   * with copies may have no rows (a copy-only step; its records are []).
   */
  copies?: KvCopy[];
  /**
   * Offloaded layers' KV (offload distance): host blocks copied into device blocks just before
   * their layer runs, after the layers before it. The device blocks are the prefetch region, which
   * the step's tables must point those layers at; each layer may reuse the same region. Host
   * blocks are read when step() is called; one still being filled by an "out" copy is refused.
   */
  prefetch?: KvPrefetch[];
  /**
   * "Out" copies of KV this step's own rows write (LayerKV's layer-wise offload): each runs right
   * after its layer's kernels, in the step's command buffer, so it copies what that layer just
   * wrote while the next layers compute. They land in host memory by the time the step's records
   * resolve, like the "out" copies of `copies`; a host block may be written once per step.
   */
  copiesAfterLayer?: KvCopy[];
  /** Block-table entries to upload before the step (new blocks, or a slot's new owner). */
  tables: TableWrite[];
  /** Sampling parameters of slots whose request changed. */
  sampling: { slot: number; params: SamplingParams }[];
  /**
   * The token counts the penalties read, for slots whose new request uses them (every such entry
   * of `sampling` needs one in the same plan): its prompt and the ids it has generated so far (a
   * resumed request takes a new slot). Applied after `sampling`; from then on the GPU counts each
   * id the slot samples.
   */
  penaltySeeds?: PenaltySeed[];
  rows: StepRow[];
  samples: StepSample[];
  wantTopLogprobs: boolean;
  /** Token masks of some samples (forward/step.ts); a step without them pays nothing for them. */
  masks?: StepMask[];
  /**
   * Several decode steps of the same rows in one submission (forward/step.ts's DecodeGroup): no
   * copies, prefetches or after-layer copies; steps × samples records.
   */
  group?: DecodeGroup;
}

/** The engine as the runtime sees it, in-process or behind a Worker. */
export interface StepEngine {
  readonly info: EngineInfo;
  /** Submits a step; resolves with its sample records once the GPU has finished it. */
  step(plan: StepPlan): Promise<SampleRecord[]>;
  /**
   * KV copies executed so far (counted at submission). Behind a Worker, as of the last records
   * received. Optional so engines without a host tier (test fakes) need not count.
   */
  copyStats?(): KvCopyStats;
  /** Waits for submitted work, then frees every GPU object the engine made. */
  close(): Promise<void>;
}

export class Engine implements StepEngine {
  private closed = false;

  private constructor(
    readonly gpu: Gpu,
    readonly config: LlamaConfig,
    /** The device KV tier (tests write to it directly). */
    readonly kv: DeviceKv,
    private readonly forward: LlamaForward,
    private readonly transfers: KvTransfers,
    private readonly ownsGpu: boolean,
    private readonly release: () => void,
    readonly info: EngineInfo,
  ) {}

  static async load(opts: EngineOptions): Promise<Engine> {
    const files = await openModelDir(opts.modelDir);
    const gpu = withKvDtype(opts.gpu ?? await openGpu({ forceF32: opts.forceF32 }), opts.kvDtype);
    const cfg = files.config;
    const maxSlots = opts.maxSlots ?? 32;
    const maxRows = Math.max(opts.maxRows ?? 128, maxSlots);
    // Two steps in flight: Deno resolves a readback only once the queue behind it has drained, so
    // deeper pipelines deliver tokens in bursts (a stream beside a long prefill waited 8.7 s
    // between tokens at 4, 1.7 s at 2) without more throughput (bench responsiveness).
    const ringSize = opts.ringSize ?? 2;
    const flag = opts.matmulKernel ?? "storage";
    let matmulKernel: MatmulChoice;
    let weights: ModelWeights;
    if (files.gguf) {
      // The formats are known once loaded: load into storage, choose, then move if textures win.
      weights = await loadWeights(gpu, files, opts.onLoadProgress);
      matmulKernel = await chooseMatmulLayout(gpu, loadedShapes(weights), { flag });
      if (matmulKernel.layout === "texture") weights = weightsToTextures(gpu, weights);
    } else {
      matmulKernel = await chooseMatmulLayout(gpu, calibrationShapes(cfg), { flag });
      weights = await loadWeights(gpu, files, opts.onLoadProgress, matmulKernel.layout);
    }
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
    const blockBytes = DeviceKv.bytesPerBlock(gpu, layout);
    const host = new HostKv(blockBytes, (opts.hostKvMb ?? 0) * 2 ** 20);
    const transfers = new KvTransfers(gpu, kv, host, opts.coalesceCopies ?? true);
    const forward = new LlamaForward(gpu, cfg, weights, kv, {
      maxRows,
      maxSlots,
      maxTopLogprobs: opts.maxTopLogprobs ?? 20,
      ringSize,
      maxDecodeSteps: opts.maxDecodeSteps ?? 1,
    });
    // A running request's KV must fit in the pool on every layer at once (the host tier holds
    // requests or layers that are not running).
    const poolTokens = blocksPerLayer(layout) * layout.blockSize;
    const info: EngineInfo = {
      architecture: cfg.architecture,
      slidingWindow: cfg.slidingWindow,
      adapter: gpu.adapterName,
      dtype: gpu.f16 ? "f16" : "f32",
      kvDtype: kvDtypeOf(gpu),
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
      maxDecodeSteps: forward.maxDecodeSteps,
      hostBlocks: host.blocks,
      kvBlockBytes: 2 * blockBytes,
      dispatchesPerStep: forward.dispatchesPerStep,
      matmulKernel,
    };
    const release = () => {
      transfers.destroy();
      forward.destroy();
      kv.destroy();
      destroyWeights(weights);
    };
    const engine = new Engine(gpu, cfg, kv, forward, transfers, !opts.gpu, release, info);
    if (!opts.skipWarmUp) {
      await engine.warmUp();
      if (opts.profileCosts ?? host.blocks > 0) info.costModel = await engine.profile();
    }
    return engine;
  }

  /**
   * Checks the whole plan (throwing, with nothing done, when any part is bad), then runs its
   * copies, table and sampling updates and kernels, in that order. The records resolve once the
   * kernels' samples are read back and the "out" copies have landed in host memory.
   */
  step(plan: StepPlan): Promise<SampleRecord[]> {
    if (this.closed) return Promise.reject(new Error("engine is closed"));
    const copies = plan.copies ?? [];
    const runs = this.transfers.plan(copies);
    const prefetchRuns = this.transfers.planPrefetch(plan.prefetch ?? [], runs);
    const afterRuns = this.transfers.planAfterLayers(
      plan.copiesAfterLayer ?? [],
      runs,
      plan.prefetch ?? [],
    );
    const copyOnly = plan.rows.length === 0 && copies.length > 0;
    if (copyOnly && plan.samples.length > 0) {
      throw new Error(`a step with no rows cannot sample (${plan.samples.length} samples)`);
    }
    if (plan.rows.length === 0 && (prefetchRuns.size > 0 || afterRuns.size > 0)) {
      throw new Error("a step with no rows cannot prefetch or copy out after a layer");
    }
    if (plan.group && (copies.length > 0 || prefetchRuns.size > 0 || afterRuns.size > 0)) {
      throw new Error("a decode group cannot copy KV");
    }
    if (!copyOnly) this.forward.check(plan);
    for (const t of plan.tables) this.kv.checkTable(t.slot, t.layer, t.blocks, t.first);
    this.checkSampling(plan);

    const landed = this.transfers.execute(runs);
    for (const t of plan.tables) this.kv.writeTable(t.slot, t.layer, t.blocks, t.first);
    for (const s of plan.sampling) this.forward.setSampling(s.slot, s.params);
    for (const s of plan.penaltySeeds ?? []) this.forward.seedPenalties(s);
    const staged = this.transfers.stagePrefetch(prefetchRuns);
    const out = this.transfers.stageAfterLayers(afterRuns);
    const records = copyOnly
      ? Promise.resolve([])
      : this.forward.submit(plan, undefined, staged?.between, out?.after);
    // The staging buffers are needed until the GPU has run the step (a step with no samples
    // resolves its records at once).
    if (staged) this.gpu.device.queue.onSubmittedWorkDone().finally(() => staged.release());
    const landedAfter = out?.land();
    if (runs.length === 0 && !landedAfter) return records;
    return Promise.all([records, landed, landedAfter]).then(([r]) => r);
  }

  /** Throws unless the plan's sampling parameters and penalty seeds can be applied. */
  private checkSampling(plan: StepPlan): void {
    const seeded = new Set<number>();
    for (const seed of plan.penaltySeeds ?? []) {
      this.forward.checkPenaltySeed(seed);
      seeded.add(seed.slot);
    }
    for (const { slot, params } of plan.sampling) {
      this.forward.checkSampling(params);
      if (usesPenalties(params) && !seeded.has(slot)) {
        throw new Error(`slot ${slot} is given penalties without a penalty seed`);
      }
    }
  }

  /** KV copies executed since load (counted when submitted). */
  copyStats(): KvCopyStats {
    return this.transfers.snapshot();
  }

  /**
   * Runs a step of each size in forward.variantRowCounts() (every row tile of every matrix, and
   * for the quantized ones x in a uniform and in storage), then steps with the full sampler, with
   * and without top logprobs, through the logit controls (a bias and a penalty: both passes), and a
   * decode group where the engine runs them. So every pipeline a request can need is built, and on
   * llvmpipe JIT-compiled, before the server says it is ready, rather than by the first client
   * (on a cold GL cache the sampler alone took minutes). Slot 0's table points at block 0
   * (scratch) meanwhile; the controls' slot state is reset to greedy after.
   */
  private async warmUp(): Promise<void> {
    const { numLayers, blockSize, maxSlots, vocabSize, maxBlocksPerSeq } = this.info;
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    // Every row is slot 0's, so no more rows than one slot's table holds positions for (a count
    // past that, if any, is compiled by the first step that needs it).
    const counts = this.forward.variantRowCounts().filter((n) => n <= maxBlocksPerSeq * blockSize);
    const blocks = new Array(Math.ceil(Math.max(...counts) / blockSize)).fill(0);
    const tables: TableWrite[] = [];
    for (let layer = 0; layer < numLayers; layer++) {
      tables.push({ slot: 0, layer, first: 0, blocks });
    }
    const rowsOf = (n: number) =>
      Array.from({ length: n }, (_, pos) => ({ slot: 0, pos, token: pos % vocabSize }));
    const lastRows = (n: number) =>
      Array.from({ length: Math.min(n, maxSlots) }, (_, i) => ({ row: n - 1 - i })).reverse();
    let sampling = [{ slot: 0, params: greedy }];
    for (const n of counts) {
      await this.step({
        tables,
        sampling,
        rows: rowsOf(n),
        samples: lastRows(n),
        wantTopLogprobs: false,
      });
      sampling = [];
    }
    const sampled = {
      temperature: 1,
      topK: 0,
      topP: 0.9,
      seed: 1,
      logitBias: [[0, 1]] as [number, number][],
      repetitionPenalty: 1.1,
    };
    for (const wantTopLogprobs of [true, false]) {
      await this.step({
        tables: [],
        sampling: [{ slot: 0, params: sampled }],
        penaltySeeds: [{ slot: 0, prompt: [0], generated: [] }],
        rows: rowsOf(1),
        samples: [{ row: 0 }],
        wantTopLogprobs,
      });
    }
    if (this.info.maxDecodeSteps > 1) {
      await this.step({
        tables: [],
        sampling: [],
        rows: [{ slot: 0, pos: 0, token: null }],
        samples: [{ row: 0 }],
        wantTopLogprobs: false,
        group: { steps: 2, budgets: [2], stopIds: [[]] },
      });
    }
    this.forward.setSampling(0, greedy);
    this.clearTables(1);
  }

  /** Points every table entry of slots 0..slots-1 at nothing. */
  private clearTables(slots: number): void {
    const clear = new Array(this.info.maxBlocksPerSeq).fill(NOT_RESIDENT);
    for (let slot = 0; slot < slots; slot++) {
      for (let layer = 0; layer < this.info.numLayers; layer++) {
        this.kv.writeTable(slot, layer, clear);
      }
    }
  }

  /**
   * Profiles step and copy costs (engine/kv/cost_profile.ts) on dummy rows that write block 0 of
   * every layer: only while no request holds KV. Returns the fitted model.
   */
  profile(opts?: ProfileOptions): Promise<CostModel> {
    return this.profiling((t) => profileCosts(t, opts));
  }

  /** Times a step of `rows` dummy rows and a device copy, alone and together (as profile). */
  measureOverlap(o: { rows: number; bytes: number; reps?: number }): Promise<OverlapMeasurement> {
    return this.profiling((t) => measureOverlap(t, o));
  }

  private async profiling<T>(run: (t: ProfileTarget) => Promise<T>): Promise<T> {
    if (this.closed) throw new Error("engine is closed");
    try {
      return await run(this.profileTarget());
    } finally {
      this.clearTables(this.info.maxSlots);
    }
  }

  /** The profile's view of this engine: steps of n dummy rows, slot i % maxSlots each. */
  private profileTarget(): ProfileTarget {
    const { numLayers, maxRows, maxSlots, ringSize, vocabSize, blockSize } = this.info;
    const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
    const entries = Math.ceil(Math.ceil(maxRows / maxSlots) / blockSize);
    for (let slot = 0; slot < maxSlots; slot++) {
      for (let layer = 0; layer < numLayers; layer++) {
        this.kv.writeTable(slot, layer, new Array(entries).fill(0));
      }
      this.forward.setSampling(slot, greedy);
    }
    return {
      gpu: this.gpu,
      numLayers,
      maxRows,
      maxSlots,
      ringSize,
      step: (n, samples, prelude) => {
        const rows = Array.from({ length: n }, (_, i) => ({
          slot: i % maxSlots,
          pos: Math.floor(i / maxSlots),
          token: i % vocabSize,
        }));
        const plan = {
          rows,
          samples: rows.slice(0, samples).map((_, row) => ({ row })),
          wantTopLogprobs: false,
        };
        return this.forward.submit(plan, prelude);
      },
    };
  }

  /** Reads the raw logits of the last step's sample rows (tests only: a synchronous round trip). */
  readLogits(samples: number): Promise<Float32Array[]> {
    return this.forward.readLogits(samples);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.forward.idle();
    await this.transfers.idle();
    this.release();
    if (this.ownsGpu) this.gpu.device.destroy();
  }
}

function destroyWeights(w: ModelWeights): void {
  const seen = new Set<GPUBuffer | GPUTexture>();
  const drop = (b: GPUBuffer | GPUTexture) => {
    if (!seen.has(b)) seen.add(b), b.destroy();
  };
  const parts = (m: { parts: MatrixPart[] }) => m.parts.forEach((p) => drop(p.buffer ?? p.texture));
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
