// What the runtime sees of the engine: its limits and KV geometry (EngineInfo), the step it asks
// for (StepPlan: host-side updates, then rows and samples) and the one call that runs it
// (StepEngine). The engine serves it in-process (engine.ts) or from a Worker (worker_engine.ts).

import type { QuantKernelChoice } from "./forward/quant_kernel_choice.ts";
import type { Architecture } from "./model/config.ts";
import type { KvDtype } from "./gpu/device.ts";
import type { TableWrite } from "./kv/device_kv.ts";
import type { KvCopy, KvPrefetch } from "./kv/kv_copies.ts";
import type { KvCopyStats } from "./kv/kv_transfers.ts";
import type { CostModel } from "./kv/cost_model.ts";
import type { SamplingParams } from "./gpu/kernels/sample.ts";
import type {
  DecodeGroup,
  HiddenRead,
  StepMask,
  StepRecords,
  StepRow,
  StepSample,
} from "./forward/step.ts";
import type { PenaltySeed } from "./forward/sampling_controls.ts";
import type { MatmulChoice } from "./forward/matmul_choice.ts";

/** What the runtime needs to know of the engine: limits, KV geometry, and labels for logs. */
export interface EngineInfo {
  /** The model's family (config.json's model_type), for logs and the engine's description. */
  architecture: Architecture;
  /** Positions a row attends to (Mistral's sliding window), or null: all before it. */
  slidingWindow: number | null;
  /** Positions each layer's row attends to (0: all before it): Gemma's local layers; absent: slidingWindow on every layer. */
  layerWindows?: number[];
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
  /** The kernels of the quantized matrices, and how they were chosen (GGUF engines). */
  quantKernels?: QuantKernelChoice;
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
  /**
   * Rows whose final-normed hidden state comes back instead of a sample (an embedding's pooled
   * rows, forward/step.ts's HiddenRead): the records' `hidden`, one vector per read, in order.
   */
  hiddenReads?: HiddenRead[];
}

/** The engine as the runtime sees it, in-process or behind a Worker. */
export interface StepEngine {
  readonly info: EngineInfo;
  /**
   * Submits a step; resolves with its sample records (and the hidden states it read) once the GPU
   * has finished it.
   */
  step(plan: StepPlan): Promise<StepRecords>;
  /**
   * KV copies executed so far (counted at submission). Behind a Worker, as of the last records
   * received. Optional so engines without a host tier (test fakes) need not count.
   */
  copyStats?(): KvCopyStats;
  /** Waits for submitted work, then frees every GPU object the engine made. */
  close(): Promise<void>;
}
