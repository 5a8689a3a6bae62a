// The Llama forward pass as a list of bound kernels, encoded into one command buffer per step.
//
// A step runs any mix of prefill-chunk rows and decode rows. Decode rows take their input token
// from `nextIds`, where the previous step's GPU sampler wrote it, so no token crosses to the host
// between steps. Sample records are copied into a ring of mappable buffers and read back a few
// steps behind.

import type { Gpu } from "../gpu/device.ts";
import type { BoundKernel } from "../gpu/kernel.ts";
import {
  createStorage,
  readF32,
  STORAGE_UNIFORM,
  uploadStorage,
  writeBytes,
} from "../gpu/buffers.ts";
import { bindEmbedding } from "../gpu/kernels/embedding.ts";
import { bindQuantEmbedding } from "../gpu/kernels/embedding_quant.ts";
import { bindRmsNorm } from "../gpu/kernels/rmsnorm.ts";
import { bindMatmul, type MatmulArgs } from "../gpu/kernels/matmul.ts";
import { bindQuantMatmul } from "../gpu/kernels/matmul_quant.ts";
import { isQuantType } from "../quant/formats.ts";
import { bindRope } from "../gpu/kernels/rope.ts";
import { bindKvWrite } from "../gpu/kernels/kv_write.ts";
import { bindAttention } from "../gpu/kernels/attention.ts";
import { bindGatherRows } from "../gpu/kernels/gather.ts";
import {
  bindSampler,
  decodeSampleRecords,
  SAMPLER_PARAMS_BYTES,
  samplerParamsBytes,
} from "../gpu/kernels/sample.ts";
import type { DeviceKv } from "../kv/device_kv.ts";
import type { LlamaConfig } from "./config.ts";
import { ropeInvFreq } from "./rope_freqs.ts";
import type { GluMatrix, GpuMatrix, MatrixFormat, ModelWeights } from "../weights/model_weights.ts";

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

/** What the forward pass reads of a step plan (the engine's StepPlan adds host-side updates). */
export interface StepPlan {
  rows: StepRow[];
  samples: StepSample[];
  /** Compute top-k logprobs for this step's samples (costs a few vocab passes per sample). */
  wantTopLogprobs: boolean;
}

export interface SampleRecord {
  id: number;
  logprob: number;
  top: [number, number][];
}

export interface SamplingParams {
  temperature: number;
  topK: number;
  topP: number;
  seed: number;
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
}

/** Commands a step encodes between layers' compute passes. */
export interface LayerCopies {
  /** Layers that need commands before their kernels. */
  layers: ReadonlySet<number>;
  encode(encoder: GPUCommandEncoder, layer: number): void;
}

const NO_TOKEN = 0xffffffff;

export class LlamaForward {
  readonly cfg: LlamaConfig;
  /** The embedding, then each layer's kernels: a step may need copies between layers. */
  private readonly head: BoundKernel[] = [];
  private readonly layers: BoundKernel[][] = [];
  private readonly tail: BoundKernel[] = [];
  private readonly samplerPlain: BoundKernel;
  private readonly samplerTop: BoundKernel;
  private readonly io: StepBuffers;
  private readonly ring: ReadbackSlot[] = [];
  private ringNext = 0;

  constructor(
    private gpu: Gpu,
    cfg: LlamaConfig,
    weights: ModelWeights,
    kv: DeviceKv,
    readonly limits: ForwardLimits,
  ) {
    this.cfg = cfg;
    const io = this.io = new StepBuffers(gpu, cfg, limits);
    const D = cfg.hiddenSize, hd = cfg.headDim, Hq = cfg.numHeads, Hkv = cfg.numKvHeads;
    const layout = kv.layout;
    const attnShape = {
      numHeads: Hq,
      numKvHeads: Hkv,
      headDim: hd,
      blockSize: layout.blockSize,
      maxSlots: layout.maxSlots,
      maxBlocksPerSeq: layout.maxBlocksPerSeq,
    };

    const embedFormat = weights.embed.format;
    for (const part of weights.embed.parts) {
      const args = {
        table: part.buffer,
        rowStart: part.rowStart,
        rowCount: part.rows,
        tokens: io.tokens,
        rowSlot: io.rowSlot,
        nextIds: io.nextIds,
        y: io.hidden,
        D,
      };
      // A quantized table (GGUF) is gathered and dequantized row by row.
      this.head.push(
        embedFormat && isQuantType(embedFormat)
          ? bindQuantEmbedding(gpu, { ...args, type: embedFormat })
          : bindEmbedding(gpu, args),
      );
    }
    weights.layers.forEach((w, layer) => {
      const eps = cfg.rmsNormEps;
      const steps: BoundKernel[] = [];
      this.layers.push(steps);
      steps.push(bindRmsNorm(gpu, { x: io.hidden, w: w.inputNorm, y: io.normed, D, eps }));
      steps.push(...matmulParts(gpu, w.qkv, io.normed, io.qkv, "store"));
      steps.push(
        bindRope(gpu, {
          qkv: io.qkv,
          positions: io.rowPos,
          invFreq: io.invFreq,
          numHeads: Hq,
          numKvHeads: Hkv,
          headDim: hd,
        }),
      );
      const cache = {
        k: kv.kOf(layer),
        v: kv.vOf(layer),
        blockTable: kv.blockTable,
        rowSlot: io.rowSlot,
        rowPos: io.rowPos,
        layer,
      };
      steps.push(bindKvWrite(gpu, { qkv: io.qkv, ...cache, ...attnShape }));
      steps.push(bindAttention(gpu, { qkv: io.qkv, out: io.attn, ...cache, ...attnShape }));
      steps.push(...matmulParts(gpu, w.o, io.attn, io.hidden, "add"));
      steps.push(
        bindRmsNorm(gpu, { x: io.hidden, w: w.postAttentionNorm, y: io.normed, D, eps }),
      );
      steps.push(...gluParts(gpu, w.gateUp, io.normed, io.mlp));
      steps.push(...matmulParts(gpu, w.down, io.mlp, io.hidden, "add"));
    });

    // Tail: runs on sample rows only.
    this.tail.push(
      bindGatherRows(gpu, { x: io.hidden, rowIndex: io.sampleRow, y: io.sampleHidden, D }),
    );
    this.tail.push(
      bindRmsNorm(gpu, {
        x: io.sampleHidden,
        w: weights.finalNorm,
        y: io.sampleNormed,
        D,
        eps: cfg.rmsNormEps,
      }),
    );
    this.tail.push(...matmulParts(gpu, weights.lmHead, io.sampleNormed, io.logits, "store"));
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

    const recordBytes = limits.maxSlots * (2 + 2 * limits.maxTopLogprobs) * 4;
    for (let i = 0; i < limits.ringSize; i++) {
      this.ring.push({
        buffer: gpu.device.createBuffer({
          size: recordBytes,
          usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
        }),
        pending: null,
        busy: false,
      });
    }
  }

  /** Number of compute dispatches one step records (for benchmarks and the one-submission check). */
  get dispatchesPerStep(): number {
    return this.head.length + this.layers.reduce((n, l) => n + l.length, 0) + this.tail.length + 1;
  }

  setSampling(slot: number, params: SamplingParams): void {
    writeBytes(
      this.gpu,
      this.io.samplingParams,
      slot * SAMPLER_PARAMS_BYTES,
      samplerParamsBytes(params),
    );
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
    if (this.ring[this.ringNext].busy) {
      throw new Error(`more than ${this.ring.length} steps unread: await an older step first`);
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
   */
  submit(
    plan: StepPlan,
    prelude?: (encoder: GPUCommandEncoder) => void,
    between?: LayerCopies,
  ): Promise<SampleRecord[]> {
    this.check(plan);
    const { rows, samples } = plan;
    const slot = this.ring[this.ringNext];
    this.ringNext = (this.ringNext + 1) % this.ring.length;

    this.io.writePlan(plan);
    const encoder = this.gpu.device.createCommandEncoder();
    prelude?.(encoder);
    let pass = encoder.beginComputePass();
    for (const k of this.head) k.encode(pass, rows.length);
    this.layers.forEach((kernels, layer) => {
      if (between?.layers.has(layer)) {
        pass.end();
        between.encode(encoder, layer);
        pass = encoder.beginComputePass();
      }
      for (const k of kernels) k.encode(pass, rows.length);
    });
    if (samples.length > 0) {
      for (const k of this.tail) k.encode(pass, samples.length);
      (plan.wantTopLogprobs ? this.samplerTop : this.samplerPlain).encode(pass, samples.length);
    }
    pass.end();
    const K = plan.wantTopLogprobs ? this.limits.maxTopLogprobs : 0;
    const recordWords = samples.length * (2 + 2 * K);
    if (recordWords > 0) {
      encoder.copyBufferToBuffer(
        plan.wantTopLogprobs ? this.io.recordsTop : this.io.recordsPlain,
        0,
        slot.buffer,
        0,
        recordWords * 4,
      );
    }
    this.gpu.device.queue.submit([encoder.finish()]);
    if (recordWords === 0) return Promise.resolve([]);

    slot.busy = true;
    const readback = slot.buffer.mapAsync(GPUMapMode.READ, 0, recordWords * 4).then(() => {
      const words = new Uint32Array(slot.buffer.getMappedRange(0, recordWords * 4).slice(0));
      slot.buffer.unmap();
      return decodeSampleRecords(words, samples.length, K);
    }).finally(() => slot.busy = false);
    slot.pending = readback.then(() => {}, () => {});
    return readback;
  }

  /**
   * Reads the raw logits of the last step's sample rows. A synchronous round trip: for tests and
   * debugging only, never in the serving loop.
   */
  async readLogits(samples: number): Promise<Float32Array[]> {
    const V = this.cfg.vocabSize;
    const all = await readF32(this.gpu, this.io.logits, samples * V);
    return Array.from({ length: samples }, (_, i) => all.subarray(i * V, (i + 1) * V));
  }

  /** Resolves when every submitted step has completed on the GPU. */
  async idle(): Promise<void> {
    await this.gpu.device.queue.onSubmittedWorkDone();
    await Promise.all(this.ring.map((slot) => slot.pending));
  }

  /** Frees the step's buffers (call after idle()). */
  destroy(): void {
    for (const slot of this.ring) slot.buffer.destroy();
    this.io.destroy();
  }
}

interface ReadbackSlot {
  buffer: GPUBuffer;
  /** The readback in flight (settled or not), for idle(). */
  pending: Promise<void> | null;
  /** True from submit until the readback has resolved and the buffer is unmapped. */
  busy: boolean;
}

/** Activation scratch and the small per-step index buffers the host writes before each submit. */
class StepBuffers {
  readonly hidden: GPUBuffer;
  readonly normed: GPUBuffer;
  readonly qkv: GPUBuffer;
  readonly attn: GPUBuffer;
  readonly mlp: GPUBuffer;
  readonly tokens: GPUBuffer;
  readonly rowSlot: GPUBuffer;
  readonly rowPos: GPUBuffer;
  readonly invFreq: GPUBuffer;
  readonly sampleRow: GPUBuffer;
  readonly sampleSlot: GPUBuffer;
  readonly samplePos: GPUBuffer;
  readonly sampleHidden: GPUBuffer;
  readonly sampleNormed: GPUBuffer;
  readonly logits: GPUBuffer;
  readonly nextIds: GPUBuffer;
  readonly samplingParams: GPUBuffer;
  readonly recordsPlain: GPUBuffer;
  readonly recordsTop: GPUBuffer;
  private readonly rowWords: Uint32Array<ArrayBuffer>;
  private readonly sampleWords: Uint32Array<ArrayBuffer>;

  constructor(private gpu: Gpu, cfg: LlamaConfig, limits: ForwardLimits) {
    const R = limits.maxRows, S = limits.maxSlots, D = cfg.hiddenSize;
    // Uniform-capable: the quantized matmuls read their x through a uniform binding where it fits.
    const f32 = (n: number, label: string) => createStorage(gpu, n * 4, label, STORAGE_UNIFORM);
    this.hidden = f32(R * D, "hidden");
    this.normed = f32(R * D, "normed");
    this.qkv = f32(R * (cfg.numHeads + 2 * cfg.numKvHeads) * cfg.headDim, "qkv");
    this.attn = f32(R * cfg.numHeads * cfg.headDim, "attn");
    this.mlp = f32(R * cfg.intermediateSize, "mlp");
    this.tokens = f32(R, "tokens");
    this.rowSlot = f32(R, "rowSlot");
    this.rowPos = f32(R, "rowPos");
    this.invFreq = uploadStorage(gpu, new Float32Array(ropeInvFreq(cfg)), "invFreq");
    this.sampleRow = f32(S, "sampleRow");
    this.sampleSlot = f32(S, "sampleSlot");
    this.samplePos = f32(S, "samplePos");
    this.sampleHidden = f32(S * D, "sampleHidden");
    this.sampleNormed = f32(S * D, "sampleNormed");
    this.logits = f32(S * cfg.vocabSize, "logits");
    this.nextIds = f32(S, "nextIds");
    this.samplingParams = createStorage(gpu, S * SAMPLER_PARAMS_BYTES, "samplingParams");
    this.recordsPlain = f32(S * 2, "records");
    this.recordsTop = f32(S * (2 + 2 * limits.maxTopLogprobs), "recordsTop");
    this.rowWords = new Uint32Array(3 * R);
    this.sampleWords = new Uint32Array(3 * S);
  }

  destroy(): void {
    for (const value of Object.values(this)) {
      if (value instanceof GPUBuffer) value.destroy();
    }
  }

  writePlan(plan: StepPlan): void {
    const n = plan.rows.length, s = plan.samples.length;
    const w = this.rowWords;
    plan.rows.forEach((r, i) => {
      w[i] = r.token ?? NO_TOKEN;
      w[n + i] = r.slot;
      w[2 * n + i] = r.pos;
    });
    const q = this.gpu.device.queue;
    q.writeBuffer(this.tokens, 0, w, 0, n);
    q.writeBuffer(this.rowSlot, 0, w, n, n);
    q.writeBuffer(this.rowPos, 0, w, 2 * n, n);
    if (s === 0) return;
    const sw = this.sampleWords;
    plan.samples.forEach((smp, i) => {
      const row = plan.rows[smp.row];
      sw[i] = smp.row;
      sw[s + i] = row.slot;
      sw[2 * s + i] = row.pos + 1; // the position of the token being generated
    });
    q.writeBuffer(this.sampleRow, 0, sw, 0, s);
    q.writeBuffer(this.sampleSlot, 0, sw, s, s);
    q.writeBuffer(this.samplePos, 0, sw, 2 * s, s);
  }
}

function matmulParts(
  gpu: Gpu,
  m: GpuMatrix,
  x: GPUBuffer,
  y: GPUBuffer,
  mode: "store" | "add",
): BoundKernel[] {
  return m.parts.map((p) =>
    bindMatrixKernel(gpu, m.format, {
      x,
      w: p.buffer,
      y,
      K: m.cols,
      N: p.rows,
      ldy: m.rows,
      yCol: p.rowStart,
      mode,
    })
  );
}

function gluParts(gpu: Gpu, m: GluMatrix, x: GPUBuffer, y: GPUBuffer): BoundKernel[] {
  return m.parts.map((p) =>
    bindMatrixKernel(gpu, m.format, {
      x,
      w: p.buffer,
      y,
      K: m.cols,
      N: p.rows,
      ldy: m.intermediate,
      yCol: p.rowStart,
      mode: "glu",
    })
  );
}

/** A quantized matrix dequantizes in its kernel; any other takes the weight-dtype matmul. */
function bindMatrixKernel(
  gpu: Gpu,
  format: MatrixFormat | undefined,
  args: MatmulArgs,
): BoundKernel {
  return format && isQuantType(format)
    ? bindQuantMatmul(gpu, { ...args, type: format })
    : bindMatmul(gpu, args);
}
