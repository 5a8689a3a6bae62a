// An embedding request's pooling: which of its prefill rows the engine reads instead of sampling
// (the last row, the first, or every row, summed per chunk on the GPU side's readback), and the
// sum of what came back. A row is marked once over the request's life: after a preemption its
// prompt is prefilled again, and the rows read before are not read twice.

import type { HiddenRead } from "../../engine/engine.ts";
import type { PoolingMode } from "../../engine/formats/pooling_config.ts";

export class PooledHidden {
  /** Positions below this were marked for reading (or need none). */
  private markedTo = 0;
  private reads = 0;
  private delivered = 0;
  private sum: Float64Array | null = null;

  constructor(readonly mode: PoolingMode, readonly length: number) {}

  /**
   * The read a chunk of prefill rows needs: positions from..to-1 in step rows from `firstRow`;
   * null when none of them is pooled (or was read already).
   */
  mark(from: number, to: number, firstRow: number): HiddenRead | null {
    const start = Math.max(from, this.markedTo);
    if (start >= to) return null;
    let read: HiddenRead | null = null;
    if (this.mode === "mean") read = { first: firstRow + start - from, count: to - start };
    else if (this.mode === "cls" && start === 0) read = { first: firstRow, count: 1 };
    else if (this.mode === "last" && to === this.length) {
      read = { first: firstRow + to - 1 - from, count: 1 };
    }
    if (this.mode === "mean") this.markedTo = to;
    // cls needs nothing past position 0, last nothing before its end: one read marks them all.
    else if (read) this.markedTo = this.length;
    if (read) this.reads++;
    return read;
  }

  /** A read came back: true once every row pooled is in. */
  add(vector: Float32Array): boolean {
    const sum = this.sum ??= new Float64Array(vector.length);
    for (let i = 0; i < vector.length; i++) sum[i] += vector[i];
    this.delivered++;
    return this.done;
  }

  get done(): boolean {
    return this.markedTo >= this.length && this.delivered === this.reads && this.sum !== null;
  }

  /** The pooled state (mean: the sum over the length), once done; not normalised. */
  vector(): Float32Array {
    if (!this.done) throw new Error("the pooled rows are not all read yet");
    const scale = this.mode === "mean" ? 1 / this.length : 1;
    return Float32Array.from(this.sum!, (x) => x * scale);
  }
}
