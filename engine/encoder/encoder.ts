// The engine's face for encoder models (BERT, XLM-RoBERTa, NomicBERT): load a directory, run a
// batch of token-id inputs through it in one pass, get back each input's pooled state or its
// classifier logits. Inputs are packed one after another (no padding); each row attends to its own
// input's rows only. The pass reads, top to bottom:
//
//   embed (word + position + type) → LayerNorm
//   per layer: qkv matmul [+ bias] [rotary] → attention → o matmul (+= x) [+ bias] → LayerNorm
//              → up matmul [+ bias] GELU (or SwiGLU's fused gate/up) → down matmul (+= x) [+ bias]
//              → LayerNorm
//   pool each input (first, mean or last row)
//   [classifier: dense + tanh → out [+ bias]]
//
// Every buffer is made through a tracked view of the device (tracked_gpu.ts), so close() destroys
// every byte, the kernels' parameter uniforms included.

import { type Gpu, openGpu } from "../gpu/device.ts";
import { createStorage, readF32, uploadStorage, writeBytes } from "../gpu/buffers.ts";
import type { BoundKernel } from "../gpu/kernel.ts";
import { bindMatmul } from "../gpu/kernels/matmul.ts";
import { bindBiasAdd } from "../gpu/kernels/bias_add.ts";
import { bindLayerNorm } from "../gpu/kernels/layer_norm.ts";
import { bindBiasAct } from "../gpu/kernels/bias_act.ts";
import { bindEncoderEmbed } from "../gpu/kernels/encoder_embed.ts";
import { bindRotaryInplace, rotaryTable } from "../gpu/kernels/rotary_inplace.ts";
import { bindEncoderAttention } from "../gpu/kernels/encoder_attention.ts";
import { bindPool, type PoolMode } from "../gpu/kernels/pool.ts";
import { ModelLoadError } from "../model/errors.ts";
import type { EncoderConfig } from "./config.ts";
import {
  defaultMatrixLayout,
  type MatrixLayout,
  resolveEncoderWeights,
  uploadEncoderWeights,
} from "./weights.ts";
import { type EncoderSource, openEncoderSource } from "./source.ts";
import type { EncoderWeights } from "./tensors.ts";
import { type TrackedGpu, trackGpu } from "./tracked_gpu.ts";

export type { PoolMode };
export type { MatrixLayout };
export type { EncoderConfig };
export { isEncoderConfig } from "./config.ts";
export { type EncoderSource, isEncoderPath, openEncoderSource } from "./source.ts";
export { type EncodedInput, EncoderTokenizer, InputTooLong } from "./encoder_tokenizer.ts";

/** One input: token ids as the model reads them (special tokens included), and their types. */
export interface EncoderInput {
  ids: readonly number[];
  /** Token type per id (BERT's segment of a pair); absent: all 0. */
  typeIds?: readonly number[];
}

export interface EncoderLoadOptions {
  /** The device to run on; absent: the model opens one of its own and destroys it on close. */
  gpu?: Gpu;
  /** With a device of its own: f32 weights even where the adapter has shader-f16. */
  forceF32?: boolean;
  /** The most tokens one pass holds, all inputs together (default 4096, at least one input's worth). */
  maxBatchTokens?: number;
  /** The most inputs one pass holds (default 256). */
  maxBatchInputs?: number;
  /** Where the matrices live (default: textures on llvmpipe, storage buffers elsewhere). */
  matrixLayout?: MatrixLayout;
}

/** The most rows one dispatch covers (WebGPU's workgroup count per dimension). */
const MAX_PASS_ROWS = 65535;

export class EncoderModel {
  readonly config: EncoderConfig;
  readonly maxBatchTokens: number;
  readonly maxBatchInputs: number;
  readonly #tracked: TrackedGpu;
  readonly #gpu: Gpu;
  readonly #weights: EncoderWeights<GPUBuffer | GPUTexture>;
  readonly #io: PassBuffers;
  readonly #layers: BoundKernel[];
  readonly #pools = new Map<PoolMode, BoundKernel>();
  readonly #head: BoundKernel[];
  /** A device opened for this model alone (destroyed on close). */
  #ownDevice: GPUDevice | null = null;
  #closed = false;

  private constructor(
    config: EncoderConfig,
    tracked: TrackedGpu,
    weights: EncoderWeights<GPUBuffer | GPUTexture>,
    maxBatchTokens: number,
    maxBatchInputs: number,
  ) {
    this.config = config;
    this.#tracked = tracked;
    this.#gpu = tracked.gpu;
    this.#weights = weights;
    this.maxBatchTokens = maxBatchTokens;
    this.maxBatchInputs = maxBatchInputs;
    this.#io = makePassBuffers(this.#gpu, config, maxBatchTokens, maxBatchInputs);
    this.#layers = this.#bindLayers();
    this.#head = this.#bindHead();
  }

  /** Opens the encoder directory or GGUF file at `path`. */
  static async load(path: string, options: EncoderLoadOptions = {}): Promise<EncoderModel> {
    return EncoderModel.fromSource(await openEncoderSource(path), options);
  }

  /** Opens an encoder from its opened files (openEncoderSource). */
  static async fromSource(
    source: EncoderSource,
    options: EncoderLoadOptions = {},
  ): Promise<EncoderModel> {
    const config = source.config;
    if (config.activation === "swiglu" && config.mlpUpBias) {
      throw new ModelLoadError(source.path, "SwiGLU with fc1 biases is not supported");
    }
    const weights = resolveEncoderWeights(source);
    const file = source.weightsFile;
    const own = options.gpu ? null : await openGpu({ forceF32: options.forceF32 });
    const tracked = trackGpu(options.gpu ?? own!);
    try {
      const layout = options.matrixLayout ?? defaultMatrixLayout(tracked.gpu);
      const buffers = await uploadEncoderWeights(tracked.gpu, file, weights, layout);
      // At least one input's worth; at most one dispatch's rows (attention runs a workgroup per row).
      const tokens = Math.min(
        Math.max(options.maxBatchTokens ?? 4096, config.maxInputTokens),
        MAX_PASS_ROWS,
      );
      const model = new EncoderModel(
        config,
        tracked,
        buffers,
        tokens,
        options.maxBatchInputs ?? 256,
      );
      model.#ownDevice = own?.device ?? null;
      return model;
    } catch (e) {
      tracked.destroyAll();
      own?.device.destroy();
      throw e;
    }
  }

  /** Each input's final states pooled by `mode` (not normalised), one vector of hiddenSize each. */
  async pooled(inputs: EncoderInput[], mode: PoolMode): Promise<Float32Array[]> {
    const count = this.#pass(inputs, [this.#pool(mode)]);
    return splitRows(
      await readF32(this.#gpu, this.#io.pooled, count * this.config.hiddenSize),
      this.config.hiddenSize,
    );
  }

  /** Each input's classifier logits (numLabels each): the head on its first (CLS) row. */
  async logits(inputs: EncoderInput[]): Promise<Float32Array[]> {
    const n = this.config.classifier?.numLabels;
    if (!n) throw new Error(`${this.config.architecture} has no classification head`);
    const count = this.#pass(inputs, [this.#pool("first"), ...this.#head]);
    return splitRows(await readF32(this.#gpu, this.#io.logits, count * n), n);
  }

  /** Device memory this model holds now. */
  deviceMemory(): { buffers: number; bytes: number } {
    return this.#tracked.live();
  }

  /** Destroys every buffer this model made. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#tracked.destroyAll();
    this.#ownDevice?.destroy();
  }

  /** Runs one pass over `inputs` (they must fit the pass) up to the tail kernels; returns the count. */
  #pass(inputs: EncoderInput[], tail: BoundKernel[]): number {
    if (this.#closed) throw new Error("the encoder is closed");
    const rows = inputs.reduce((a, x) => a + x.ids.length, 0);
    if (inputs.length === 0) return 0;
    if (inputs.length > this.maxBatchInputs || rows > this.maxBatchTokens) {
      throw new RangeError(
        `a pass holds ${this.maxBatchInputs} inputs and ${this.maxBatchTokens} tokens ` +
          `(got ${inputs.length} and ${rows})`,
      );
    }
    this.#writeInputs(inputs, rows);
    const encoder = this.#gpu.device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    for (const k of this.#layers) k.encode(pass, rows);
    for (const k of tail) k.encode(pass, inputs.length);
    pass.end();
    this.#gpu.device.queue.submit([encoder.finish()]);
    return inputs.length;
  }

  #writeInputs(inputs: EncoderInput[], rows: number): void {
    const c = this.config;
    const rows3 = new Uint32Array(rows * 3);
    const positions = new Uint32Array(rows);
    const rowSpans = new Uint32Array(rows * 2);
    const inputSpans = new Uint32Array(inputs.length * 2);
    let at = 0;
    inputs.forEach((input, k) => {
      const n = input.ids.length;
      if (n === 0) throw new RangeError(`input ${k} is empty`);
      if (n > c.maxInputTokens) {
        throw new RangeError(`input ${k} has ${n} tokens, over ${c.maxInputTokens}`);
      }
      inputSpans.set([at, at + n], 2 * k);
      for (let i = 0; i < n; i++) {
        const id = input.ids[i];
        const type = input.typeIds?.[i] ?? 0;
        if (!Number.isInteger(id) || id < 0 || id >= c.vocabSize) {
          throw new RangeError(`input ${k}: token id ${id} is outside the vocabulary`);
        }
        if (!Number.isInteger(type) || type < 0 || type >= Math.max(1, c.typeVocabSize)) {
          throw new RangeError(`input ${k}: token type ${type} is outside the model's types`);
        }
        const r = at + i;
        rows3.set([id, c.positionOffset + i, type], 3 * r);
        positions[r] = i;
        rowSpans.set([at, at + n], 2 * r);
      }
      at += n;
    });
    const io = this.#io;
    writeBytes(this.#gpu, io.rows3, 0, rows3);
    writeBytes(this.#gpu, io.positions, 0, positions);
    writeBytes(this.#gpu, io.rowSpans, 0, rowSpans);
    writeBytes(this.#gpu, io.inputSpans, 0, inputSpans);
  }

  #bindLayers(): BoundKernel[] {
    const gpu = this.#gpu;
    const c = this.config;
    const w = this.#weights;
    const io = this.#io;
    const H = c.hiddenSize;
    const I = c.intermediateSize;
    const eps = c.layerNormEps;
    const norm = (gain: GPUBuffer, bias: GPUBuffer) =>
      bindLayerNorm(gpu, { x: io.x, gain, bias, D: H, eps });
    const kernels: BoundKernel[] = [
      bindEncoderEmbed(gpu, {
        rows3: io.rows3,
        word: vec(w.word),
        position: vec(w.position),
        tokenType: vec(w.tokenType),
        x: io.x,
        D: H,
      }),
      norm(vec(w.embNormGain), vec(w.embNormBias)),
    ];
    const cosSin = c.rotaryDim > 0
      ? uploadStorage(gpu, rotaryTable(c.maxInputTokens, c.rotaryDim, c.rotaryBase), "rotary")
      : null;
    for (const l of w.layers) {
      kernels.push(
        bindMatmul(gpu, { x: io.x, w: l.qkv, y: io.qkv, K: H, N: 3 * H, mode: "store" }),
      );
      const qkvBias = vec(l.qkvBias);
      if (qkvBias) kernels.push(bindBiasAdd(gpu, { x: io.qkv, b: qkvBias, width: 3 * H }));
      if (cosSin) {
        kernels.push(bindRotaryInplace(gpu, {
          qkv: io.qkv,
          positions: io.positions,
          cosSin,
          heads: c.numHeads,
          headDim: c.headDim,
          rotDim: c.rotaryDim,
        }));
      }
      kernels.push(bindEncoderAttention(gpu, {
        qkv: io.qkv,
        spans: io.rowSpans,
        out: io.ctx,
        heads: c.numHeads,
        headDim: c.headDim,
      }));
      kernels.push(bindMatmul(gpu, { x: io.ctx, w: l.o, y: io.x, K: H, N: H, mode: "add" }));
      const oBias = vec(l.oBias);
      if (oBias) kernels.push(bindBiasAdd(gpu, { x: io.x, b: oBias, width: H }));
      kernels.push(norm(vec(l.attnNormGain), vec(l.attnNormBias)));
      if (c.activation === "swiglu") {
        kernels.push(bindMatmul(gpu, { x: io.x, w: l.up, y: io.inter, K: H, N: I, mode: "glu" }));
      } else {
        kernels.push(bindMatmul(gpu, { x: io.x, w: l.up, y: io.inter, K: H, N: I, mode: "store" }));
        kernels.push(
          bindBiasAct(gpu, { x: io.inter, b: vec(l.upBias), width: I, act: c.activation }),
        );
      }
      kernels.push(bindMatmul(gpu, { x: io.inter, w: l.down, y: io.x, K: I, N: H, mode: "add" }));
      const downBias = vec(l.downBias);
      if (downBias) kernels.push(bindBiasAdd(gpu, { x: io.x, b: downBias, width: H }));
      kernels.push(norm(vec(l.mlpNormGain), vec(l.mlpNormBias)));
    }
    return kernels;
  }

  #pool(mode: PoolMode): BoundKernel {
    let k = this.#pools.get(mode);
    if (!k) {
      const io = this.#io;
      k = bindPool(this.#gpu, {
        x: io.x,
        spans: io.inputSpans,
        y: io.pooled,
        D: this.config.hiddenSize,
        mode,
      });
      this.#pools.set(mode, k);
    }
    return k;
  }

  #bindHead(): BoundKernel[] {
    const w = this.#weights;
    const cls = this.config.classifier;
    if (!cls || !w.headDense || !w.headOut) return [];
    const gpu = this.#gpu;
    const io = this.#io;
    const H = this.config.hiddenSize;
    const n = cls.numLabels;
    const kernels = [
      bindMatmul(gpu, {
        x: io.pooled,
        w: w.headDense,
        y: io.headHidden,
        K: H,
        N: H,
        mode: "store",
      }),
      bindBiasAct(gpu, { x: io.headHidden, b: vec(w.headDenseBias), width: H, act: "tanh" }),
      bindMatmul(gpu, {
        x: io.headHidden,
        w: vec(w.headOut),
        y: io.logits,
        K: H,
        N: n,
        mode: "store",
      }),
    ];
    const headOutBias = vec(w.headOutBias);
    if (headOutBias) kernels.push(bindBiasAdd(gpu, { x: io.logits, b: headOutBias, width: n }));
    return kernels;
  }
}

/** A weight that is never a matrix (tables, norms, biases): always a storage buffer. */
function vec<T extends GPUBuffer | GPUTexture | null>(w: T): Exclude<T, GPUTexture> {
  if (w instanceof GPUTexture) throw new Error("a vector weight in a texture");
  return w as Exclude<T, GPUTexture>;
}

/** The activations of one pass, sized for the most tokens and inputs a pass holds. */
interface PassBuffers {
  rows3: GPUBuffer;
  positions: GPUBuffer;
  rowSpans: GPUBuffer;
  inputSpans: GPUBuffer;
  x: GPUBuffer;
  qkv: GPUBuffer;
  ctx: GPUBuffer;
  inter: GPUBuffer;
  pooled: GPUBuffer;
  headHidden: GPUBuffer;
  logits: GPUBuffer;
}

function makePassBuffers(gpu: Gpu, c: EncoderConfig, tokens: number, inputs: number): PassBuffers {
  const H = c.hiddenSize;
  const f32 = (n: number, label: string) => createStorage(gpu, n * 4, label);
  return {
    rows3: createStorage(gpu, tokens * 12, "rows3"),
    positions: createStorage(gpu, tokens * 4, "positions"),
    rowSpans: createStorage(gpu, tokens * 8, "row spans"),
    inputSpans: createStorage(gpu, inputs * 8, "input spans"),
    x: f32(tokens * H, "x"),
    qkv: f32(tokens * 3 * H, "qkv"),
    ctx: f32(tokens * H, "ctx"),
    inter: f32(tokens * c.intermediateSize, "inter"),
    pooled: f32(inputs * H, "pooled"),
    headHidden: f32(c.classifier ? inputs * H : 1, "head hidden"),
    logits: f32(c.classifier ? inputs * c.classifier.numLabels : 1, "logits"),
  };
}

function splitRows(flat: Float32Array, width: number): Float32Array[] {
  return Array.from(
    { length: flat.length / width },
    (_, i) => flat.slice(i * width, (i + 1) * width),
  );
}
