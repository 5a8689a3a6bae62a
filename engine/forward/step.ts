// What one step of the forward pass is given: token rows (a request's slot, its position, its
// token), the rows whose logits are sampled and the rows whose hidden state is read instead (an
// embedding's pooling). What it gives back, a SampleRecord per sample, is the sampler's
// (gpu/kernels/sample.ts), with the hidden states it was asked for beside them.

import type { QuantKernels } from "./quant_kernel_choice.ts";
import type { SampleRecord } from "../gpu/kernels/sample.ts";

/** One token row of a step. `token: null` means "the id the sampler wrote for this slot last step". */
export interface StepRow {
  slot: number;
  pos: number;
  token: number | null;
}

/** A row whose logits are sampled: the last row of a prefill's final chunk, or a decode row. */
export interface StepSample {
  row: number;
}

/**
 * Rows whose final-normed hidden state (rmsnorm(hidden) · finalNorm, what the LM head reads) a
 * step returns, summed: `count` consecutive rows from `first` (one row: its state; a prefill
 * chunk's rows: their sum, for mean pooling). Nothing is sampled for them.
 */
export interface HiddenRead {
  first: number;
  count: number;
}

/** A step's results: a record per sample, and a vector per hidden read when the plan had any. */
export type StepRecords = SampleRecord[] & { hidden?: Float32Array[] };

/**
 * A sample row's token mask (constrained decoding): bit id % 32 of word floor(id / 32) set means
 * id is allowed (xgrammar's bitmask layout); a disallowed id's logit is -inf before sampling.
 */
export interface StepMask {
  /** Index into the step's samples. */
  sample: number;
  /** ceil(V / 32) words, V the logits width (EngineInfo.vocabSize). */
  bits: Uint32Array;
}

/** What the forward pass reads of a step plan (the engine's StepPlan adds host-side updates). */
export interface StepPlan {
  rows: StepRow[];
  samples: StepSample[];
  /** Compute top-k logprobs for this step's samples (costs a few vocab passes per sample). */
  wantTopLogprobs: boolean;
  /** Token masks of some samples; the others sample unmasked (and pay nothing for it). */
  masks?: StepMask[];
  /** Run the rows as a decode group: several decode steps in one submission (below). */
  group?: DecodeGroup;
  /** Hidden states to read back (never in a decode group); records.hidden, in this order. */
  hiddenReads?: HiddenRead[];
}

/**
 * Multi-step decode: the plan's rows run `steps` times in one submission, each time one position
 * further, taking the id their sampler just drew, as `steps` plans of the same decode rows would
 * (the sampler's draw depends only on the seed and the position, so seeded sampling agrees too).
 * Every row must be a decode row (token null) and sampled, in row order, with no masks. Records
 * come back step by step: steps × samples of them, the first step's samples first. A row stops
 * (it holds its position and writes no new KV) once it has taken its budget of samples or sampled
 * one of its stop ids; its records after that are whatever the sampler drew, for the host to drop.
 */
export interface DecodeGroup {
  steps: number;
  /** Per sample: the most samples it may take in the group (>= 1; its request's tokens left). */
  budgets: number[];
  /** Per sample: ids that end it (the GPU checks the first MAX_GROUP_STOP_IDS). */
  stopIds: number[][];
}

export interface ForwardLimits {
  /** Most token rows in one step (prefill chunk + decode rows). */
  maxRows: number;
  /** Most concurrent requests (KV slots). */
  maxSlots: number;
  /** K of top-K logprobs computed when a step asks for them. */
  maxTopLogprobs: number;
  /** How many steps may be in flight before the oldest readback must be awaited. */
  ringSize: number;
  /** Most steps of one decode group (StepPlan.group); default 1, no groups. */
  maxDecodeSteps?: number;
  /**
   * Positions a sequence may reach (EngineInfo.maxContext), which picks LongRoPE's factors
   * (model/rope_freqs.ts); default the model's max_position_embeddings.
   */
  maxContext?: number;
  /**
   * The kernels for quantized matrices (quant_kernel_choice.ts): "int" quantizes x to int8 blocks
   * and multiplies by integer dot products; default "float".
   */
  quantKernels?: QuantKernels;
}
