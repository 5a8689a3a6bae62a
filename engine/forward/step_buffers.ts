// The forward pass's activation scratch and the small per-step index buffers the host writes
// before each submit: which token, slot and position each row has, and which rows are sampled.

import type { Gpu } from "../gpu/device.ts";
import { createStorage, STORAGE_UNIFORM, uploadStorage } from "../gpu/buffers.ts";
import { createMatmulX } from "../gpu/kernels/matmul_quant.ts";
import { createQuantizedX, destroyQuantizedX, type QuantizedX } from "../gpu/kernels/quantize_x.ts";
import { TOKEN_FROM_SAMPLER } from "../gpu/kernels/embedding.ts";
import { SAMPLER_PARAMS_BYTES } from "../gpu/kernels/sample.ts";
import { GROUP_STATE_WORDS, groupStateWords } from "../gpu/kernels/decode_advance.ts";
import type { LlamaConfig } from "../model/config.ts";
import { ropeInvFreq } from "../model/rope_freqs.ts";
import type { DecodeGroup, ForwardLimits, StepPlan } from "./step.ts";

export class StepBuffers {
  readonly hidden: GPUBuffer;
  readonly qkv: GPUBuffer;
  readonly attn: GPUBuffer;
  readonly mlp: GPUBuffer;
  readonly tokens: GPUBuffer;
  readonly rowSlot: GPUBuffer;
  readonly rowPos: GPUBuffer;
  readonly invFreq: GPUBuffer;
  /** Gemma 3's local layers' inverse frequencies (their own base, unscaled); else invFreq. */
  readonly invFreqLocal: GPUBuffer;
  /** A branch's output before its norm joins it to hidden (Gemma 3's sandwich norms), else unused. */
  readonly branch: GPUBuffer;
  readonly sampleRow: GPUBuffer;
  readonly sampleSlot: GPUBuffer;
  readonly samplePos: GPUBuffer;
  readonly sampleHidden: GPUBuffer;
  readonly logits: GPUBuffer;
  readonly nextIds: GPUBuffer;
  readonly samplingParams: GPUBuffer;
  readonly recordsPlain: GPUBuffer;
  readonly recordsTop: GPUBuffer;
  /** A decode group's per-sample state (gpu/kernels/decode_advance.ts). */
  readonly groupState: GPUBuffer;
  /**
   * With the integer-dot kernels: x of the quantized matrices as int8 blocks, one scratch for
   * every matrix (each quantize_x is read by its matmuls before the next overwrites it).
   */
  readonly quantizedX: QuantizedX | null;
  private readonly rowWords: Uint32Array<ArrayBuffer>;
  private readonly sampleWords: Uint32Array<ArrayBuffer>;

  constructor(private gpu: Gpu, cfg: LlamaConfig, limits: ForwardLimits) {
    const R = limits.maxRows, S = limits.maxSlots, D = cfg.hiddenSize;
    const f32 = (n: number, label: string) => createStorage(gpu, n * 4, label, STORAGE_UNIFORM);
    // Matrix inputs: the quantized matmuls read their x through a uniform binding where it fits.
    const x = (n: number, label: string) => createMatmulX(gpu, n * 4, label);
    this.hidden = x(R * D, "hidden");
    this.qkv = f32(R * (cfg.numHeads + 2 * cfg.numKvHeads) * cfg.headDim, "qkv");
    this.attn = x(R * cfg.numHeads * cfg.headDim, "attn");
    this.mlp = x(R * cfg.intermediateSize, "mlp");
    this.tokens = f32(R, "tokens");
    this.rowSlot = f32(R, "rowSlot");
    this.rowPos = f32(R, "rowPos");
    this.invFreq = uploadStorage(
      gpu,
      new Float32Array(ropeInvFreq(cfg, limits.maxContext ?? cfg.maxPositionEmbeddings)),
      "invFreq",
    );
    const local = cfg.localLayers;
    this.invFreqLocal = local
      ? uploadStorage(
        gpu,
        new Float32Array(ropeInvFreq({ ...cfg, ropeTheta: local.ropeTheta, ropeScaling: null })),
        "invFreqLocal",
      )
      : this.invFreq;
    this.branch = f32(cfg.sandwichNorms ? R * D : 1, "branch");
    this.sampleRow = f32(S, "sampleRow");
    this.sampleSlot = f32(S, "sampleSlot");
    this.samplePos = f32(S, "samplePos");
    this.sampleHidden = x(S * D, "sampleHidden");
    this.logits = f32(S * cfg.vocabSize, "logits");
    this.nextIds = f32(S, "nextIds");
    this.samplingParams = createStorage(gpu, S * SAMPLER_PARAMS_BYTES, "samplingParams");
    this.recordsPlain = f32(S * 2, "records");
    this.recordsTop = f32(S * (2 + 2 * limits.maxTopLogprobs), "recordsTop");
    this.groupState = createStorage(gpu, S * GROUP_STATE_WORDS * 4, "groupState");
    const widestK = Math.max(D, cfg.numHeads * cfg.headDim, cfg.intermediateSize);
    this.quantizedX = limits.quantKernels === "int"
      ? createQuantizedX(gpu, Math.max(R, S) * Math.ceil(widestK / 32) * 32, "quantized x")
      : null;
    this.rowWords = new Uint32Array(3 * R);
    this.sampleWords = new Uint32Array(3 * S);
  }

  destroy(): void {
    for (const value of Object.values(this)) {
      if (value instanceof GPUBuffer) value.destroy();
    }
    if (this.quantizedX) destroyQuantizedX(this.quantizedX);
  }

  writePlan(plan: StepPlan): void {
    const n = plan.rows.length, s = plan.samples.length;
    const w = this.rowWords;
    plan.rows.forEach((r, i) => {
      w[i] = r.token ?? TOKEN_FROM_SAMPLER;
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

  /** A decode group's starting state: its budgets and stop ids, nothing taken yet. */
  writeGroup(group: DecodeGroup): void {
    this.gpu.device.queue.writeBuffer(
      this.groupState,
      0,
      groupStateWords(group.budgets, group.stopIds),
    );
  }
}
