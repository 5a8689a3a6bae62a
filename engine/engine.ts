// The engine: a model on the GPU that runs the step plans it is given. It owns the device, the
// weights, the kernels and the KV memory, and knows nothing of requests, queues or time: the
// runtime decides what each step holds (rows, samples, block-table and sampling updates).
//
// This file is the engine's public face. Engine.load is the one way to open a forward pass:
// serve, generate, the benches and the tests all call it. Benches see its kernel list and its
// dummy steps here, and name the few internals they use in bench_api.ts.
//
// The same interface (StepEngine) is served in-process (tests, `generate`) or from a Worker
// (engine/worker.ts, for `serve`), so the GPU loop never runs on the thread that serves HTTP.

import { type Gpu, type KvDtype, kvDtypeOf, openGpu, withKvDtype } from "./gpu/device.ts";
import { DeviceKv } from "./kv/device_kv.ts";
import { blocksPerLayer } from "./kv/pool_shape.ts";
import { HostKv } from "./kv/host_kv.ts";
import { type KvCopyStats, KvTransfers } from "./kv/kv_transfers.ts";
import { profileCosts, type ProfileTarget } from "./kv/cost_profile.ts";
import { layerWindows, type LlamaConfig } from "./model/config.ts";
import { ForwardPass } from "./forward/pass.ts";
import type { ForwardKernels } from "./forward/forward.ts";
import type { StepRecords } from "./forward/step.ts";
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
import {
  chooseQuantKernels,
  type QuantKernelChoice,
  type QuantKernelFlag,
} from "./forward/quant_kernel_choice.ts";
import { weightsToTextures } from "./weights/texture_parts.ts";
import { destroyWeights, type ModelWeights } from "./weights/model_weights.ts";
import { clearTables, profileTarget, type ScratchParts, warmUp } from "./scratch_steps.ts";
import type { EngineInfo, StepEngine, StepPlan } from "./step_engine.ts";

export type { EngineInfo, StepEngine, StepPlan } from "./step_engine.ts";
export type { TableWrite } from "./kv/device_kv.ts";
export type { KvCopy, KvPrefetch } from "./kv/kv_copies.ts";
export type { KvCopyStats } from "./kv/kv_transfers.ts";
export type { CostModel } from "./kv/cost_model.ts";
export type { SampleRecord, SamplingParams } from "./gpu/kernels/sample.ts";
export type {
  DecodeGroup,
  HiddenRead,
  StepMask,
  StepRecords,
  StepRow,
  StepSample,
} from "./forward/step.ts";
export type { PenaltySeed } from "./forward/sampling_controls.ts";
export type { ForwardKernels } from "./forward/forward.ts";
export type { BoundKernel, KernelKind } from "./gpu/kernel.ts";
// The device an engine runs on: open one to share among engines (EngineOptions.gpu).
export { type Gpu, type KvDtype, openGpu };

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
  /**
   * Where float weights live and so which matmul kernel reads them (forward/matmul_choice.ts):
   * "auto" times both at first start and caches the winner per adapter and model shape. Default:
   * "storage". A GGUF model is loaded into storage buffers, timed on its own formats, and moved
   * into textures where they win (weights/texture_parts.ts).
   */
  matmulKernel?: MatmulKernelFlag;
  /**
   * Which kernels multiply a GGUF model's quantized matrices (forward/quant_kernel_choice.ts):
   * "auto" times the float and the integer-dot kernels at first start where the runtime has WGSL's
   * packed_4x8_integer_dot_product, and caches the winner; "float" or "int" forces one. Default
   * "float" (tests, as matmulKernel's "storage"); the CLI's default is "auto".
   */
  quantKernels?: QuantKernelFlag;
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

export class Engine implements StepEngine {
  private closed = false;

  private constructor(
    readonly gpu: Gpu,
    readonly config: LlamaConfig,
    /** The device KV tier (tests write to it directly). */
    readonly kv: DeviceKv,
    /** The weights on the device (tests check where they live). */
    readonly weights: ModelWeights,
    private readonly forward: ForwardPass,
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
    // Safetensors models have no quantized matrices: nothing to choose (the flag does nothing).
    let quantKernels: QuantKernelChoice = { kernels: "float", source: "none" };
    if (files.gguf) {
      // The formats are known once loaded: load into storage, choose, then move if textures win.
      weights = await loadWeights(gpu, files, opts.onLoadProgress);
      matmulKernel = await chooseMatmulLayout(gpu, loadedShapes(weights), { flag });
      if (matmulKernel.layout === "texture") weights = weightsToTextures(gpu, weights);
      quantKernels = await chooseQuantKernels(gpu, loadedShapes(weights), {
        flag: opts.quantKernels ?? "float",
        layout: matmulKernel.layout,
      });
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
    const transfers = new KvTransfers(gpu, kv, host);
    // A running request's KV must fit in the pool on every layer at once (the host tier holds
    // requests or layers that are not running).
    const poolTokens = blocksPerLayer(layout) * layout.blockSize;
    const maxContext = Math.min(
      cfg.maxPositionEmbeddings,
      layout.maxBlocksPerSeq * layout.blockSize,
      poolTokens,
    );
    const forward = new ForwardPass(gpu, cfg, weights, kv, {
      maxRows,
      maxSlots,
      maxTopLogprobs: opts.maxTopLogprobs ?? 20,
      ringSize,
      maxDecodeSteps: opts.maxDecodeSteps ?? 1,
      maxContext,
      quantKernels: quantKernels.kernels,
    });
    const info: EngineInfo = {
      architecture: cfg.architecture,
      slidingWindow: cfg.slidingWindow,
      layerWindows: layerWindows(cfg),
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
      maxContext,
      ringSize,
      maxDecodeSteps: forward.maxDecodeSteps,
      hostBlocks: host.blocks,
      kvBlockBytes: 2 * blockBytes,
      dispatchesPerStep: forward.dispatchesPerStep,
      matmulKernel,
      quantKernels,
    };
    const release = () => {
      transfers.destroy();
      forward.destroy();
      kv.destroy();
      destroyWeights(weights);
    };
    const engine = new Engine(gpu, cfg, kv, weights, forward, transfers, !opts.gpu, release, info);
    if (!opts.skipWarmUp) {
      await warmUp(engine.scratch);
      if (opts.profileCosts ?? host.blocks > 0) {
        info.costModel = await engine.profileWith((t) => profileCosts(t));
      }
    }
    return engine;
  }

  /**
   * Checks the whole plan (throwing, with nothing done, when any part is bad), then runs its
   * copies, table and sampling updates and kernels, in that order. The records resolve once the
   * kernels' samples are read back and the "out" copies have landed in host memory.
   */
  step(plan: StepPlan): Promise<StepRecords> {
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
    const records: Promise<StepRecords> = copyOnly
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

  /** The kernels each step encodes, in order (forward/forward.ts). */
  get kernels(): ForwardKernels {
    return this.forward.kernels;
  }

  /**
   * Later steps encode `kernels`: this engine's own list, or a bench's wrapping or filtering of
   * it (bench/common/forward_bench.ts). No other list will do: its kernels are bound to this
   * engine's buffers.
   */
  useKernels(kernels: ForwardKernels): void {
    this.forward.useKernels(kernels);
  }

  /**
   * Runs `run` over this engine's steps on dummy rows that write block 0 of every layer (the load
   * profiles its cost model so; bench kv measures overlap): only while no request holds KV. The
   * tables are cleared after.
   */
  async profileWith<T>(run: (t: ProfileTarget) => Promise<T>): Promise<T> {
    if (this.closed) throw new Error("engine is closed");
    try {
      return await run(profileTarget(this.scratch));
    } finally {
      clearTables(this.scratch, this.info.maxSlots);
    }
  }

  /** What the dummy steps (scratch_steps.ts) drive. */
  private get scratch(): ScratchParts {
    const { gpu, info, kv, forward } = this;
    return { gpu, info, kv, forward, step: (plan) => this.step(plan) };
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
