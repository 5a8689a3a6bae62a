// The state behind the sampling controls (gpu/kernels/logit_controls.ts): each slot's controls and
// logit bias, its token counts for the penalties, and each step's masks. A step whose sample rows
// have no control and no mask encodes no pass, and a server whose requests never ask for one
// allocates nothing.
//
// Memory, allocated on first use: the counts, maxSlots · V · 4 bytes (32 slots × 128,256 ids =
// 16.4 MB), at the first request with a penalty; the rest, maxSlots · (8 KiB of bias table + 4 ·
// ceil(V / 32) bytes of mask + 28 bytes), at the first request with a control or a mask.

import type { Gpu } from "../gpu/device.ts";
import { createStorage, writeBytes } from "../gpu/buffers.ts";
import type { BoundKernel } from "../gpu/kernel.ts";
import {
  BIAS_TABLE_BYTES,
  biasTable,
  bindLogitControls,
  CONTROLS_BYTES,
  controlsBytes,
  countsRow,
  hasLogitControls,
  MAX_LOGIT_BIAS,
  NO_MASK,
  usesPenalties,
} from "../gpu/kernels/logit_controls.ts";
import type { SamplingParams } from "../gpu/kernels/sample.ts";
import type { StepMask } from "./step.ts";

/** A slot's token counts seeded when a request takes it: its prompt and the ids it generated. */
export interface PenaltySeed {
  slot: number;
  prompt: number[];
  generated: number[];
}

interface Buffers {
  controls: GPUBuffer;
  bias: GPUBuffer;
  controlRows: GPUBuffer;
  masks: GPUBuffer;
  /** A placeholder until a penalty needs the real counts. */
  counts: GPUBuffer;
  adjust: BoundKernel;
  count: BoundKernel;
}

export class SamplingControls {
  readonly maskWords: number;
  /** Per slot: its request has controls / penalties (host mirror of what the GPU holds). */
  private readonly controlled: boolean[];
  private readonly penalized: boolean[];
  private buffers: Buffers | null = null;
  private hasCounts = false;
  /** Rows listed by the last `list`, for `adjust` and `count`. */
  private listed = 0;
  private countNeeded = false;

  constructor(
    private readonly gpu: Gpu,
    private readonly io: {
      V: number;
      maxSlots: number;
      /** f32 [samples, V]. */
      logits: GPUBuffer;
      sampleSlot: GPUBuffer;
      nextIds: GPUBuffer;
    },
  ) {
    this.maskWords = Math.ceil(io.V / 32);
    this.controlled = new Array(io.maxSlots).fill(false);
    this.penalized = new Array(io.maxSlots).fill(false);
  }

  /** Throws unless `p`'s controls fit: ids in the vocabulary, at most MAX_LOGIT_BIAS entries. */
  checkParams(p: SamplingParams): void {
    const bias = p.logitBias ?? [];
    if (bias.length > MAX_LOGIT_BIAS) {
      throw new RangeError(`logit bias has ${bias.length} entries (max ${MAX_LOGIT_BIAS})`);
    }
    for (const [id, b] of bias) {
      if (!Number.isInteger(id) || id < 0 || id >= this.io.V || !Number.isFinite(b)) {
        throw new RangeError(
          `logit bias entry [${id}, ${b}] is outside the vocabulary or not finite`,
        );
      }
    }
  }

  /** Throws unless the seed's slot and ids are in range. */
  checkSeed(seed: PenaltySeed): void {
    this.checkSlot(seed.slot);
    const bad = [...seed.prompt, ...seed.generated].find((id) =>
      !Number.isInteger(id) || id < 0 || id >= this.io.V
    );
    if (bad !== undefined) throw new RangeError(`penalty seed id ${bad} is outside the vocabulary`);
  }

  /** Throws unless each mask names a distinct sample of `samples` and has maskWords words. */
  checkMasks(masks: readonly StepMask[], samples: number): void {
    const seen = new Set<number>();
    for (const m of masks) {
      if (
        !Number.isInteger(m.sample) || m.sample < 0 || m.sample >= samples || seen.has(m.sample)
      ) {
        throw new RangeError(`mask for sample ${m.sample}: not one distinct sample of ${samples}`);
      }
      if (m.bits.length !== this.maskWords) {
        throw new RangeError(
          `mask for sample ${m.sample} has ${m.bits.length} words, not ${this.maskWords}`,
        );
      }
      seen.add(m.sample);
    }
  }

  /**
   * The slot's request changed: its controls and bias table, if it has any. A slot given
   * penalties must be seeded before its next sample (the engine sends both in one plan).
   */
  set(slot: number, p: SamplingParams): void {
    this.checkSlot(slot);
    this.checkParams(p);
    this.controlled[slot] = hasLogitControls(p);
    this.penalized[slot] = usesPenalties(p);
    if (!this.controlled[slot]) return; // never listed: what the GPU holds for it is unread
    const b = this.penalized[slot] ? this.ensureCounts() : this.ensureBuffers();
    writeBytes(this.gpu, b.controls, slot * CONTROLS_BYTES, controlsBytes(p));
    const table = biasTable(p);
    if (table.length > 0) writeBytes(this.gpu, b.bias, slot * BIAS_TABLE_BYTES, table);
  }

  /** Seeds the slot's counts (queue-ordered: after the steps already submitted). */
  seed(s: PenaltySeed): void {
    this.checkSeed(s);
    const b = this.ensureCounts();
    writeBytes(
      this.gpu,
      b.counts,
      s.slot * this.io.V * 4,
      countsRow(this.io.V, s.prompt, s.generated),
    );
  }

  /**
   * Before the step's adjust: lists its sample rows with controls or a mask and uploads the masks.
   * Writes nothing when there are none.
   */
  list(sampleSlots: readonly number[], masks: readonly StepMask[] = []): void {
    const maskOf = new Map(masks.map((m, i) => [m.sample, i]));
    const rows: number[] = [];
    this.countNeeded = false;
    sampleSlots.forEach((slot, s) => {
      const mask = maskOf.get(s);
      if (!this.controlled[slot] && mask === undefined) return;
      rows.push(s, mask ?? NO_MASK);
      if (this.penalized[slot]) this.countNeeded = true;
    });
    this.listed = rows.length / 2;
    if (this.listed === 0) return;
    const b = this.ensureBuffers();
    const q = this.gpu.device.queue;
    q.writeBuffer(b.controlRows, 0, new Uint32Array(rows));
    masks.forEach((m, i) => writeBytes(this.gpu, b.masks, i * this.maskWords * 4, m.bits));
  }

  /**
   * The forward pass's kernels around the sampler (forward.ts): `adjust` before it, over the rows
   * `list` listed; `count` after it, counting the sampled ids of the penalized ones. Each encodes
   * nothing when no row needs it.
   */
  readonly adjust: BoundKernel = {
    kind: "controls",
    encode: (pass) => {
      if (this.listed > 0) this.buffers!.adjust.encode(pass, this.listed);
    },
  };
  readonly count: BoundKernel = {
    kind: "controls",
    encode: (pass) => {
      if (this.countNeeded) this.buffers!.count.encode(pass, this.listed);
    },
  };

  /** `list`, then `adjust` into `pass` (for a test rig without the forward pass). */
  encodeAdjust(
    pass: GPUComputePassEncoder,
    sampleSlots: readonly number[],
    masks: readonly StepMask[] = [],
  ): void {
    this.list(sampleSlots, masks);
    this.adjust.encode(pass, sampleSlots.length);
  }

  /** `count` into `pass` (for a test rig without the forward pass). */
  encodeCount(pass: GPUComputePassEncoder): void {
    this.count.encode(pass, this.listed);
  }

  destroy(): void {
    const b = this.buffers;
    if (b) { for (const x of [b.controls, b.bias, b.controlRows, b.masks, b.counts]) x.destroy(); }
    this.buffers = null;
  }

  private checkSlot(slot: number): void {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.io.maxSlots) {
      throw new RangeError(`slot ${slot} is outside 0..${this.io.maxSlots - 1}`);
    }
  }

  private ensureBuffers(): Buffers {
    if (this.buffers) return this.buffers;
    const S = this.io.maxSlots;
    return this.bind({
      controls: createStorage(this.gpu, S * CONTROLS_BYTES, "samplingControls"),
      bias: createStorage(this.gpu, S * BIAS_TABLE_BYTES, "logitBias"),
      controlRows: createStorage(this.gpu, S * 8, "controlRows"),
      masks: createStorage(this.gpu, S * this.maskWords * 4, "tokenMasks"),
      counts: createStorage(this.gpu, 4, "tokenCountsPlaceholder"),
    });
  }

  private ensureCounts(): Buffers {
    const b = this.ensureBuffers();
    if (this.hasCounts) return b;
    const bytes = this.io.maxSlots * this.io.V * 4;
    if (bytes > this.gpu.maxBinding) {
      throw new RangeError(
        `penalty counts need ${bytes} bytes, more than one binding holds (${this.gpu.maxBinding})`,
      );
    }
    b.counts.destroy();
    this.hasCounts = true;
    return this.bind({ ...b, counts: createStorage(this.gpu, bytes, "tokenCounts") });
  }

  private bind(b: Omit<Buffers, "adjust" | "count">): Buffers {
    const kernels = bindLogitControls(this.gpu, { ...this.io, ...b });
    return this.buffers = { ...b, ...kernels };
  }
}
