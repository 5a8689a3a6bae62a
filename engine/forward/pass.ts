// Runs the forward pass's kernel list (forward.ts) as steps: each step's kernels are encoded into
// one command buffer, in one compute pass broken only where the step copies KV between layers.
//
// A step runs any mix of prefill-chunk rows and decode rows. Decode rows take their input token
// from `nextIds`, where the previous step's GPU sampler wrote it, so no token crosses to the host
// between steps. The buffers the kernels share are step_buffers.ts's; sample records come back
// through a readback ring (gpu/readback_ring.ts), read a few steps behind. A decode group (a plan's
// `group`: multi-step decode) encodes the whole pass several times into that one command buffer,
// the rows moved on between steps on the GPU (gpu/kernels/decode_advance.ts).

import type { Gpu } from "../gpu/device.ts";
import type { BoundKernel } from "../gpu/kernel.ts";
import { readF32, writeBytes } from "../gpu/buffers.ts";
import { ReadbackRing } from "../gpu/readback_ring.ts";
import { bindDecodeAdvance, type DecodeAdvance } from "../gpu/kernels/decode_advance.ts";
import {
  decodeSampleRecords,
  SAMPLER_PARAMS_BYTES,
  type SampleRecord,
  samplerParamsBytes,
  type SamplingParams,
} from "../gpu/kernels/sample.ts";
import { isGreedy } from "../gpu/kernels/sample_greedy.ts";
import type { DeviceKv } from "../kv/device_kv.ts";
import type { LayerCopies } from "../kv/kv_transfers.ts";
import type { LlamaConfig } from "../model/config.ts";
import type { ModelWeights } from "../weights/model_weights.ts";
import { bindForward, type BoundForward, type ForwardKernels } from "./forward.ts";
import type { ForwardLimits, StepPlan, StepRecords } from "./step.ts";
import { HiddenReadout } from "./hidden_readout.ts";
import { StepBuffers } from "./step_buffers.ts";
import { type PenaltySeed, SamplingControls } from "./sampling_controls.ts";

export class ForwardPass {
  readonly cfg: LlamaConfig;
  /** The list as bound: what destroy() frees, whatever list the steps encode. */
  private readonly bound: BoundForward;
  /** The list each step encodes: the bound one, or a bench's wrapping of it (useKernels). */
  private encoded: ForwardKernels;
  /** Per slot: its sampling is greedy (as setSampling last set it), so the greedy sampler may take it. */
  private readonly greedySlots: Uint8Array;
  private readonly io: StepBuffers;
  /** Logit bias, penalties and masks: passes around the sampler for the rows that have them. */
  private readonly controls: SamplingControls;
  /** Where each step's sample records are copied for the host to read. */
  private readonly readback: ReadbackRing;
  /** The hidden states a step returns instead of sampling (an embedding's rows). */
  private readonly hiddenReadout: HiddenReadout;
  /** Moves a decode group's rows on between its steps; bound by the first group. */
  private advance: DecodeAdvance | null = null;

  constructor(
    private gpu: Gpu,
    cfg: LlamaConfig,
    weights: ModelWeights,
    kv: DeviceKv,
    readonly limits: ForwardLimits,
  ) {
    this.cfg = cfg;
    const io = this.io = new StepBuffers(gpu, cfg, limits);
    this.controls = new SamplingControls(gpu, {
      V: cfg.vocabSize,
      maxSlots: limits.maxSlots,
      logits: io.logits,
      sampleSlot: io.sampleSlot,
      nextIds: io.nextIds,
    });
    this.bound = bindForward(gpu, cfg, weights, kv, io, this.controls, limits);
    this.encoded = this.bound.kernels;
    this.greedySlots = new Uint8Array(limits.maxSlots).fill(1);
    this.hiddenReadout = new HiddenReadout(
      gpu,
      io.hidden,
      weights.finalNorm,
      cfg.hiddenSize,
      cfg.rmsNormEps,
      limits.maxRows,
    );
    // A ring entry holds every step of a decode group.
    const recordBytes = limits.maxSlots * (2 + 2 * limits.maxTopLogprobs) * 4;
    this.readback = new ReadbackRing(gpu, limits.ringSize, recordBytes * this.maxDecodeSteps);
  }

  /** The kernels a step encodes, in order. */
  get kernels(): ForwardKernels {
    return this.encoded;
  }

  /**
   * Later steps encode `kernels`: this pass's own list or one made from it (a bench wraps or
   * filters it; the kernels are bound to this pass's buffers, so no other list will do).
   */
  useKernels(kernels: ForwardKernels): void {
    if (kernels.layers.length !== this.bound.kernels.layers.length) {
      throw new Error(
        `a kernel list of ${kernels.layers.length} layers for a model of ` +
          `${this.bound.kernels.layers.length}`,
      );
    }
    this.encoded = kernels;
  }

  /**
   * Step sizes whose steps, sampling min(rows, maxSlots) rows each, run every pipeline of the
   * step's kernels (BoundKernel.variantRows): the head's and layers' kernels see the step's rows,
   * the tail's its sample rows. Counts past the limits are never run, so never needed.
   */
  variantRowCounts(): number[] {
    const { maxRows, maxSlots } = this.limits;
    const { head, layers, tail } = this.encoded;
    const counts = new Set<number>([1]);
    for (const k of [...head, ...layers.flat()]) {
      for (const n of k.variantRows ?? []) if (n <= maxRows) counts.add(n);
    }
    for (const k of tail) {
      for (const n of k.variantRows ?? []) if (n <= Math.min(maxRows, maxSlots)) counts.add(n);
    }
    return [...counts].sort((a, b) => a - b);
  }

  /**
   * Number of compute dispatches one greedy step records (for benchmarks and the one-submission
   * check): the greedy sampler's two; a step that takes the full sampler records one fewer.
   */
  get dispatchesPerStep(): number {
    const { head, layers, tail } = this.encoded;
    return head.length + layers.reduce((n, l) => n + l.length, 0) + tail.length + 2;
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
    this.hiddenReadout.check(plan.hiddenReads ?? [], rows.length);
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
    if (plan.hiddenReads?.length) throw new Error("a decode group reads no hidden states");
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
  ): Promise<StepRecords> {
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
    const reads = plan.hiddenReads ?? [];
    const hidden = reads.length > 0 ? this.hiddenReadout.encode(encoder, reads) : null;
    this.gpu.device.queue.submit([encoder.finish()]);
    const records: Promise<SampleRecord[]> = recordBytes === 0
      ? Promise.resolve([])
      : this.readback.read(
        entry,
        steps * recordBytes,
        (words) => decodeSampleRecords(words, steps * samples.length, K),
      );
    if (!hidden) return records;
    return Promise.all([records, hidden()]).then(([r, h]) => Object.assign(r, { hidden: h }));
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
    const { head, layers, tail, adjust, count } = this.encoded;
    let pass = encoder.beginComputePass();
    // Commands outside the compute pass: it is ended before them and a new one begun after.
    const apart = (commands: (encoder: GPUCommandEncoder) => void) => {
      pass.end();
      commands(encoder);
      pass = encoder.beginComputePass();
    };
    const kernel = (k: BoundKernel, n: number) =>
      k.encodeApart ? apart((e) => k.encodeApart!(e, n)) : k.encode(pass, n);
    moveRows?.(pass);
    for (const k of head) kernel(k, rows.length);
    layers.forEach((kernels, layer) => {
      if (between?.layers.has(layer)) apart((e) => between.encode(e, layer));
      for (const k of kernels) kernel(k, rows.length);
      if (after?.layers.has(layer)) apart((e) => after.encode(e, layer));
    });
    if (samples.length > 0) {
      for (const k of tail) kernel(k, samples.length);
      // Bias, penalties and masks of the rows that have any; nothing at all when none has.
      const slots = samples.map((smp) => rows[smp.row].slot);
      this.controls.list(slots, plan.masks);
      kernel(adjust, samples.length);
      kernel(this.samplerFor(plan, slots), samples.length);
      // Each penalized slot's sampled id joins its counts for the next step.
      kernel(count, samples.length);
    }
    pass.end();
  }

  /**
   * The sampler for a step, chosen on the host from the slots' sampling: the greedy one when every
   * sample row is greedy and no top logprobs are asked (the same records, fewer passes).
   */
  private samplerFor(plan: StepPlan, slots: number[]): BoundKernel {
    const { samplers } = this.encoded;
    if (plan.wantTopLogprobs) return samplers.top;
    return slots.every((slot) => this.greedySlots[slot] === 1) ? samplers.greedy : samplers.plain;
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
    this.bound.destroy();
    this.controls.destroy();
    this.io.destroy();
  }
}
