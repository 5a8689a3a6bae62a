// The Llama forward pass as a list of bound kernels, encoded into one command buffer per step, in
// the order the model computes (as llama2.c's forward()): embed, then per layer attention and MLP
// around the residual stream, then, on the sampled rows only, the LM head, the sampling controls
// (for rows that have any) and the GPU sampler. The other families are this pass with per-layer
// options: Qwen2's q, k, v biases, Qwen3's q and k norms, Mistral's sliding window.
//
// A step runs any mix of prefill-chunk rows and decode rows. Decode rows take their input token
// from `nextIds`, where the previous step's GPU sampler wrote it, so no token crosses to the host
// between steps. The buffers the kernels share are step_buffers.ts's; sample records come back
// through a readback ring (gpu/readback_ring.ts), read a few steps behind. A decode group (a plan's
// `group`: multi-step decode) encodes the whole pass several times into that one command buffer,
// the rows moved on between steps on the GPU (gpu/kernels/decode_advance.ts).

import type { Gpu } from "../gpu/device.ts";
import type { BoundKernel, KernelKind } from "../gpu/kernel.ts";
import type { KernelTimer } from "../gpu/kernel_timer.ts";
import { readF32, writeBytes } from "../gpu/buffers.ts";
import { ReadbackRing } from "../gpu/readback_ring.ts";
import { bindBiasAdd } from "../gpu/kernels/bias_add.ts";
import { bindQkNorm } from "../gpu/kernels/qk_norm.ts";
import { bindKvWrite } from "../gpu/kernels/kv_write.ts";
import { bindAttention } from "../gpu/kernels/attention.ts";
import { bindGatherRows } from "../gpu/kernels/gather.ts";
import { bindDecodeAdvance, type DecodeAdvance } from "../gpu/kernels/decode_advance.ts";
import {
  bindSampler,
  decodeSampleRecords,
  SAMPLER_PARAMS_BYTES,
  type SampleRecord,
  samplerParamsBytes,
  type SamplingParams,
} from "../gpu/kernels/sample.ts";
import { bindGreedySampler, isGreedy } from "../gpu/kernels/sample_greedy.ts";
import type { DeviceKv } from "../kv/device_kv.ts";
import type { LayerCopies } from "../kv/kv_transfers.ts";
import type { LlamaConfig } from "../model/config.ts";
import type { ModelWeights } from "../weights/model_weights.ts";
import { embeddingParts, gluParts, matmulParts } from "./matrix_kernels.ts";
import type { ForwardLimits, StepPlan } from "./step.ts";
import { StepBuffers } from "./step_buffers.ts";
import { type PenaltySeed, SamplingControls } from "./sampling_controls.ts";

/** For benchmarks only: a pass built without the kernels of some kinds (bench step-split). */
export interface ForwardBenchOptions {
  skipKinds?: ReadonlySet<KernelKind>;
  /** false: greedy steps take the one-workgroup sampler too (to compare the two). */
  greedySampler?: boolean;
  /** Each kernel in a timed pass of its own (bench decode's step split); see gpu/kernel_timer.ts. */
  timer?: KernelTimer;
}

/** What a skipped sampler encodes. */
const SKIPPED = { kind: "sampler", encode() {}, destroy() {} } as const;

export class LlamaForward {
  readonly cfg: LlamaConfig;
  /** The embedding, then each layer's kernels: a step may need copies between layers. */
  private readonly head: BoundKernel[];
  private readonly layers: BoundKernel[][];
  private readonly tail: BoundKernel[];
  private readonly samplerPlain: BoundKernel;
  private readonly samplerTop: BoundKernel;
  /** Argmax over many workgroups: for steps whose rows are all greedy and want no top logprobs. */
  private readonly samplerGreedy: BoundKernel & { destroy(): void };
  /** Per slot: its sampling is greedy (as setSampling last set it), so samplerGreedy may take it. */
  private readonly greedySlots: Uint8Array;
  private readonly greedyPath: boolean;
  private readonly io: StepBuffers;
  /** Logit bias, penalties and masks: passes around the sampler for the rows that have them. */
  private readonly controls: SamplingControls;
  /** Where each step's sample records are copied for the host to read. */
  private readonly readback: ReadbackRing;
  /** Moves a decode group's rows on between its steps; bound by the first group. */
  private advance: DecodeAdvance | null = null;
  private readonly timer?: KernelTimer;

  constructor(
    private gpu: Gpu,
    cfg: LlamaConfig,
    weights: ModelWeights,
    kv: DeviceKv,
    readonly limits: ForwardLimits,
    bench: ForwardBenchOptions = {},
  ) {
    this.cfg = cfg;
    const io = this.io = new StepBuffers(gpu, cfg, limits);
    const D = cfg.hiddenSize, hd = cfg.headDim, Hq = cfg.numHeads, Hkv = cfg.numKvHeads;
    const eps = cfg.rmsNormEps;
    const layout = kv.layout;
    const heads = { numHeads: Hq, numKvHeads: Hkv, headDim: hd };
    const attnShape = {
      numHeads: Hq,
      numKvHeads: Hkv,
      headDim: hd,
      blockSize: layout.blockSize,
      maxSlots: layout.maxSlots,
      maxBlocksPerSeq: layout.maxBlocksPerSeq,
    };

    // Embedding: hidden = the row's token's embedding (a decode row's token is its slot's nextIds).
    this.head = embeddingParts(gpu, weights.embed, {
      tokens: io.tokens,
      rowSlot: io.rowSlot,
      nextIds: io.nextIds,
      y: io.hidden,
      D,
    });

    this.layers = weights.layers.map((w, layer) => {
      const cache = {
        k: kv.kOf(layer),
        v: kv.vOf(layer),
        blockTable: kv.blockTable,
        rowSlot: io.rowSlot,
        rowPos: io.rowPos,
        invFreq: io.invFreq,
        layer,
      };
      return [
        // q, k and v of every head in one matmul, the attention norm fused into its x loads:
        // qkv = (rmsnorm(hidden) · inputNorm) · Wqkvᵀ.
        ...matmulParts(gpu, w.qkv, io.hidden, io.qkv, "store", "weights", {
          gain: w.inputNorm,
          eps,
        }),
        // Qwen2: qkv += the q, k and v biases.
        ...(w.qkvBias
          ? [bindBiasAdd(gpu, { x: io.qkv, b: w.qkvBias, width: (Hq + 2 * Hkv) * hd })]
          : []),
        // Qwen3: each q and k head = rmsnorm(head) · qNorm (kNorm), in place.
        ...(w.qkNorm ? [bindQkNorm(gpu, { qkv: io.qkv, w: w.qkNorm, ...heads, eps })] : []),
        // The rows' k, rotated by their positions (RoPE), and v into their slots' paged KV cache.
        bindKvWrite(gpu, { qkv: io.qkv, ...cache, ...attnShape }),
        // Causal attention of each row's q heads, rotated as they are loaded (RoPE), over its
        // slot's cache (grouped-query), over the last slidingWindow positions only where the model
        // has a window (Mistral): attn.
        bindAttention(gpu, {
          qkv: io.qkv,
          out: io.attn,
          ...cache,
          ...attnShape,
          window: cfg.slidingWindow ?? 0,
        }),
        // Output projection into the residual stream: hidden += attn · Woᵀ.
        ...matmulParts(gpu, w.o, io.attn, io.hidden, "add"),
        // SwiGLU, the MLP norm fused into its x loads: with normed = rmsnorm(hidden) ·
        // postAttentionNorm, mlp = silu(normed · Wgateᵀ) * (normed · Wupᵀ).
        ...gluParts(gpu, w.gateUp, io.hidden, io.mlp, { gain: w.postAttentionNorm, eps }),
        // Down projection into the residual stream: hidden += mlp · Wdownᵀ.
        ...matmulParts(gpu, w.down, io.mlp, io.hidden, "add"),
      ];
    });

    // Tail: runs on sample rows only.
    this.tail = [
      // The sampled rows' hidden states, gathered into consecutive rows.
      bindGatherRows(gpu, { x: io.hidden, rowIndex: io.sampleRow, y: io.sampleHidden, D }),
      // LM head (the embedding when tied), the final norm fused into its x loads:
      // logits = (rmsnorm(sampleHidden) · finalNorm) · Wlmᵀ.
      ...matmulParts(gpu, weights.lmHead, io.sampleHidden, io.logits, "store", "lmHead", {
        gain: weights.finalNorm,
        eps,
      }),
    ];
    // The sampler: each sample's next id into nextIds (the next step's input) and its record
    // (id, logprob, and top-K logprobs when asked) into records, for the readback.
    const samplerArgs = {
      logits: io.logits,
      V: cfg.vocabSize,
      sampleSlot: io.sampleSlot,
      samplePos: io.samplePos,
      params: io.samplingParams,
      nextIds: io.nextIds,
    };
    this.samplerPlain = bindSampler(gpu, { ...samplerArgs, out: io.recordsPlain, topLogprobs: 0 });
    this.samplerTop = bindSampler(gpu, {
      ...samplerArgs,
      out: io.recordsTop,
      topLogprobs: limits.maxTopLogprobs,
    });
    this.samplerGreedy = bindGreedySampler(gpu, {
      ...samplerArgs,
      maxRows: limits.maxSlots,
      out: io.recordsPlain,
    });
    this.greedySlots = new Uint8Array(limits.maxSlots).fill(1);
    this.greedyPath = bench.greedySampler ?? true;

    this.controls = new SamplingControls(gpu, {
      V: cfg.vocabSize,
      maxSlots: limits.maxSlots,
      logits: io.logits,
      sampleSlot: io.sampleSlot,
      nextIds: io.nextIds,
    });

    // A ring entry holds every step of a decode group.
    const recordBytes = limits.maxSlots * (2 + 2 * limits.maxTopLogprobs) * 4;
    this.readback = new ReadbackRing(gpu, limits.ringSize, recordBytes * this.maxDecodeSteps);

    this.timer = bench.timer;
    // bench step-split only: the same pass without the kernels of some kinds.
    const skip = bench.skipKinds;
    if (skip) {
      const keep = (k: BoundKernel) => k.kind === undefined || !skip.has(k.kind);
      this.head = this.head.filter(keep);
      this.layers = this.layers.map((kernels) => kernels.filter(keep));
      this.tail = this.tail.filter(keep);
      if (skip.has("sampler")) this.samplerPlain = this.samplerTop = this.samplerGreedy = SKIPPED;
    }
  }

  /**
   * Step sizes whose steps, sampling min(rows, maxSlots) rows each, run every pipeline of the
   * step's kernels (BoundKernel.variantRows): the head's and layers' kernels see the step's rows,
   * the tail's its sample rows. Counts past the limits are never run, so never needed.
   */
  variantRowCounts(): number[] {
    const { maxRows, maxSlots } = this.limits;
    const counts = new Set<number>([1]);
    for (const k of [...this.head, ...this.layers.flat()]) {
      for (const n of k.variantRows ?? []) if (n <= maxRows) counts.add(n);
    }
    for (const k of this.tail) {
      for (const n of k.variantRows ?? []) if (n <= Math.min(maxRows, maxSlots)) counts.add(n);
    }
    return [...counts].sort((a, b) => a - b);
  }

  /** Each kind's kernels in one step's head, layers and tail, for bench step-split. */
  kernelsByKind(): Map<KernelKind | "other", number> {
    const counts = new Map<KernelKind | "other", number>();
    for (const k of [...this.head, ...this.layers.flat(), ...this.tail]) {
      counts.set(k.kind ?? "other", (counts.get(k.kind ?? "other") ?? 0) + 1);
    }
    return counts;
  }

  /**
   * Number of compute dispatches one greedy step records (for benchmarks and the one-submission
   * check): the greedy sampler's two; a step that takes the full sampler records one fewer.
   */
  get dispatchesPerStep(): number {
    return this.head.length + this.layers.reduce((n, l) => n + l.length, 0) + this.tail.length + 2;
  }

  /** Most steps one decode group may run. */
  get maxDecodeSteps(): number {
    return this.limits.maxDecodeSteps ?? 1;
  }

  /** Throws what setSampling would throw for `params`, before anything is written. */
  checkSampling(params: SamplingParams): void {
    this.controls.checkParams(params);
  }

  setSampling(slot: number, params: SamplingParams): void {
    this.controls.set(slot, params);
    this.greedySlots[slot] = isGreedy(params) ? 1 : 0;
    writeBytes(
      this.gpu,
      this.io.samplingParams,
      slot * SAMPLER_PARAMS_BYTES,
      samplerParamsBytes(params),
    );
  }

  /** Seeds a slot's token counts for its penalties (see sampling_controls.ts). */
  seedPenalties(seed: PenaltySeed): void {
    this.controls.seed(seed);
  }

  /** Throws what seedPenalties would throw for `seed`. */
  checkPenaltySeed(seed: PenaltySeed): void {
    this.controls.checkSeed(seed);
  }

  /** Throws what submit would throw for `plan`, before anything is encoded or written. */
  check(plan: StepPlan): void {
    const { rows, samples } = plan;
    if (rows.length === 0 || rows.length > this.limits.maxRows) {
      throw new Error(`step has ${rows.length} rows (max ${this.limits.maxRows})`);
    }
    if (samples.length > this.limits.maxSlots) {
      throw new Error(`step samples ${samples.length} rows (max ${this.limits.maxSlots})`);
    }
    this.controls.checkMasks(plan.masks ?? [], samples.length);
    if (plan.group) this.checkGroup(plan);
    if (this.readback.full) {
      throw new Error(`more than ${this.readback.size} steps unread: await an older step first`);
    }
  }

  /** Throws unless `plan` is a decode group this pass can run (see DecodeGroup). */
  private checkGroup(plan: StepPlan): void {
    const { rows, samples, group } = plan;
    const { steps, budgets, stopIds } = group!;
    if (!Number.isInteger(steps) || steps < 1 || steps > this.maxDecodeSteps) {
      throw new RangeError(`decode group of ${steps} steps (max ${this.maxDecodeSteps})`);
    }
    if (plan.masks?.length) throw new Error("a decode group's rows cannot be masked");
    if (samples.length !== rows.length || samples.some((smp, i) => smp.row !== i)) {
      throw new Error("every row of a decode group must be sampled, in row order");
    }
    if (rows.some((r) => r.token !== null)) {
      throw new Error("a decode group's rows take their ids from the sampler (token null)");
    }
    if (new Set(rows.map((r) => r.slot)).size !== rows.length) {
      throw new Error("a decode group has two rows of one slot");
    }
    if (budgets.length !== samples.length || stopIds.length !== samples.length) {
      throw new Error("a decode group needs a budget and stop ids per sample");
    }
    if (budgets.some((b) => !Number.isInteger(b) || b < 1)) {
      throw new RangeError("a decode group's budgets must be integers >= 1");
    }
  }

  /**
   * Encodes and submits one step, synchronously, so steps reach the GPU in call order. Returns a
   * promise of the step's sample records that resolves once the GPU has finished it; awaiting it is
   * the caller's choice (a few steps later). At most ringSize steps may be unread at once.
   * `prelude` encodes commands into the step's command buffer before its compute pass (the cost
   * profile uses it to time a copy and a step in one submission). `between` encodes commands just
   * before the kernels of the layers it names (offloaded KV brought into the prefetch region): the
   * compute pass is ended there and a new one begun, so the copies sit between the layers.
   * `after` encodes commands just after the kernels of the layers it names (copies out of the KV
   * the layer just wrote), the same way.
   */
  submit(
    plan: StepPlan,
    prelude?: (encoder: GPUCommandEncoder) => void,
    between?: LayerCopies,
    after?: LayerCopies,
  ): Promise<SampleRecord[]> {
    this.check(plan);
    const { samples } = plan;
    const steps = plan.group?.steps ?? 1;
    if (steps > 1 && (between || after)) {
      throw new Error("a decode group cannot copy KV between layers");
    }
    const entry = this.readback.take();

    this.io.writePlan(plan);
    if (plan.group) this.io.writeGroup(plan.group);
    const encoder = this.gpu.device.createCommandEncoder();
    prelude?.(encoder);
    const K = plan.wantTopLogprobs ? this.limits.maxTopLogprobs : 0;
    const recordBytes = samples.length * (2 + 2 * K) * 4;
    for (let step = 0; step < steps; step++) {
      // Every kernel is encoded with the same row counts each time, so their uniforms hold.
      const advance = plan.group
        ? this.advance ??= bindDecodeAdvance(this.gpu, { state: this.io.groupState, ...this.io })
        : null;
      const moveRows = advance
        ? (pass: GPUComputePassEncoder) =>
          step === 0
            ? advance.encodeBegin(pass, samples.length)
            : advance.encodeAdvance(pass, samples.length)
        : undefined;
      this.encodeStep(encoder, plan, moveRows, between, after);
      if (recordBytes > 0) {
        encoder.copyBufferToBuffer(
          plan.wantTopLogprobs ? this.io.recordsTop : this.io.recordsPlain,
          0,
          entry.buffer,
          step * recordBytes,
          recordBytes,
        );
      }
    }
    this.timer?.resolve(encoder);
    this.gpu.device.queue.submit([encoder.finish()]);
    if (recordBytes === 0) return Promise.resolve([]);

    return this.readback.read(
      entry,
      steps * recordBytes,
      (words) => decodeSampleRecords(words, steps * samples.length, K),
    );
  }

  /** One step's compute passes: the forward pass, then the sampling of its sample rows. */
  private encodeStep(
    encoder: GPUCommandEncoder,
    plan: StepPlan,
    moveRows?: (pass: GPUComputePassEncoder) => void,
    between?: LayerCopies,
    after?: LayerCopies,
  ): void {
    const { rows, samples } = plan;
    let pass = encoder.beginComputePass();
    // Benchmarks' kernel timer: each kernel in a timed pass of its own, between plain ones.
    const timer = this.timer;
    const run = (label: string, encode: (p: GPUComputePassEncoder) => void) => {
      if (!timer) return encode(pass);
      pass.end();
      const timed = timer.beginPass(encoder, label);
      encode(timed);
      timed.end();
      pass = encoder.beginComputePass();
    };
    const kernel = (k: BoundKernel, n: number) => run(k.kind ?? "other", (p) => k.encode(p, n));
    if (moveRows) run("advance", moveRows);
    for (const k of this.head) kernel(k, rows.length);
    this.layers.forEach((kernels, layer) => {
      if (between?.layers.has(layer)) {
        pass.end();
        between.encode(encoder, layer);
        pass = encoder.beginComputePass();
      }
      for (const k of kernels) kernel(k, rows.length);
      if (after?.layers.has(layer)) {
        pass.end();
        after.encode(encoder, layer);
        pass = encoder.beginComputePass();
      }
    });
    if (samples.length > 0) {
      for (const k of this.tail) kernel(k, samples.length);
      // Bias, penalties and masks of the rows that have any; nothing at all when none has.
      const slots = samples.map((smp) => rows[smp.row].slot);
      run("controls", (p) => this.controls.encodeAdjust(p, slots, plan.masks));
      kernel(this.samplerFor(plan, slots), samples.length);
      // Each penalized slot's sampled id joins its counts for the next step.
      run("controls", (p) => this.controls.encodeCount(p));
    }
    pass.end();
  }

  /**
   * The sampler for a step, chosen on the host from the slots' sampling: the greedy one when every
   * sample row is greedy and no top logprobs are asked (the same records, fewer passes).
   */
  private samplerFor(plan: StepPlan, slots: number[]): BoundKernel {
    if (plan.wantTopLogprobs) return this.samplerTop;
    if (!this.greedyPath) return this.samplerPlain;
    return slots.every((slot) => this.greedySlots[slot] === 1)
      ? this.samplerGreedy
      : this.samplerPlain;
  }

  /**
   * Reads the logits of the last step's sample rows: raw, except that rows with sampling controls
   * or a mask hold them adjusted (in place). A synchronous round trip: for tests and debugging
   * only, never in the serving loop.
   */
  async readLogits(samples: number): Promise<Float32Array[]> {
    const V = this.cfg.vocabSize;
    const all = await readF32(this.gpu, this.io.logits, samples * V);
    return Array.from({ length: samples }, (_, i) => all.subarray(i * V, (i + 1) * V));
  }

  /** Resolves when every submitted step has completed on the GPU. */
  async idle(): Promise<void> {
    await this.gpu.device.queue.onSubmittedWorkDone();
    await this.readback.idle();
  }

  /** Frees the step's buffers (call after idle()). */
  destroy(): void {
    this.readback.destroy();
    this.samplerGreedy.destroy();
    this.controls.destroy();
    this.io.destroy();
  }
}
