// The hidden states a step returns instead of sampling (an embedding's pooling, a reranker's last
// position): the rows' residual stream after the last layer, copied out of the step's `hidden`
// buffer in the step's own command buffer, then final-normed on the host as the LM head would
// norm them (rmsnorm · finalNorm). Only the rows the reads name cross to the host, and nothing is
// bound into the forward pass: a step without reads pays nothing. The norm runs on the host, in
// float64, because its cost there (D multiply-adds a row) is nothing beside the copy's.

import type { Gpu } from "../gpu/device.ts";
import { readBack } from "../gpu/buffers.ts";
import { f16BitsToF32 } from "../quant/half.ts";
import type { HiddenRead } from "./step.ts";

export class HiddenReadout {
  /** finalNorm's gain on the host, read from the device once, on the first read. */
  private gain: Promise<Float64Array> | null = null;

  constructor(
    private readonly gpu: Gpu,
    /** f32 [maxRows, D]: the step's residual stream. */
    private readonly hidden: GPUBuffer,
    /** [D] in the GPU's float dtype (f16 when the device holds weights so). */
    private readonly finalNorm: GPUBuffer,
    private readonly D: number,
    private readonly eps: number,
    private readonly maxRows: number,
  ) {}

  /** Throws unless every read names rows of a step of `rows` rows. */
  check(reads: readonly HiddenRead[], rows: number): void {
    for (const { first, count } of reads) {
      if (!Number.isInteger(first) || !Number.isInteger(count) || first < 0 || count < 1) {
        throw new RangeError(`hidden read of rows ${first}+${count}`);
      }
      if (first + count > rows) {
        throw new RangeError(`hidden read of rows ${first}..${first + count - 1} of ${rows}`);
      }
    }
  }

  /**
   * Encodes the copy of the rows `reads` span (after the step's kernels, outside any compute pass)
   * and returns what resolves, once the step has run, to one summed final-normed vector per read.
   */
  encode(encoder: GPUCommandEncoder, reads: readonly HiddenRead[]): () => Promise<Float32Array[]> {
    const from = Math.min(...reads.map((r) => r.first));
    const to = Math.max(...reads.map((r) => r.first + r.count));
    if (to > this.maxRows) throw new RangeError(`hidden read past row ${this.maxRows}`);
    const bytes = (to - from) * this.D * 4;
    const staging = this.gpu.device.createBuffer({
      size: bytes,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
      label: "hiddenReadout",
    });
    encoder.copyBufferToBuffer(this.hidden, from * this.D * 4, staging, 0, bytes);
    return async () => {
      const gain = await this.finalGain();
      try {
        await staging.mapAsync(GPUMapMode.READ);
        const rows = new Float32Array(staging.getMappedRange().slice(0));
        return reads.map((r) => this.normedSum(rows, r.first - from, r.count, gain));
      } finally {
        staging.destroy();
      }
    };
  }

  /** Σ over `count` rows from `first` of rmsnorm(row) · gain. */
  private normedSum(rows: Float32Array, first: number, count: number, gain: Float64Array) {
    const D = this.D;
    const sum = new Float64Array(D);
    for (let r = first; r < first + count; r++) {
      const row = rows.subarray(r * D, (r + 1) * D);
      let squares = 0;
      for (let i = 0; i < D; i++) squares += row[i] * row[i];
      const scale = 1 / Math.sqrt(squares / D + this.eps);
      for (let i = 0; i < D; i++) sum[i] += row[i] * scale * gain[i];
    }
    return Float32Array.from(sum);
  }

  private finalGain(): Promise<Float64Array> {
    return this.gain ??= (async () => {
      const f16 = this.gpu.f16;
      const bytes = await readBack(this.gpu, this.finalNorm, this.D * (f16 ? 2 : 4));
      if (!f16) return Float64Array.from(new Float32Array(bytes));
      return Float64Array.from(new Uint16Array(bytes), f16BitsToF32);
    })();
  }
}
