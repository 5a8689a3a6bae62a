// The shape every kernel wrapper shares: bind once (buffers and static sizes fixed), encode every step.
//
// A bound kernel owns a small uniform holding its parameters. Static ones are written at bind time;
// the per-step row count is rewritten only when it changes. queue.writeBuffer is ordered with
// queue.submit, so a bound kernel may be encoded at most once per submit.

import type { Gpu } from "./device.ts";
import { createUniform } from "./buffers.ts";

/** A kernel's buffer argument: a whole buffer or a range of one. */
export type BufferArg = GPUBuffer | GPUBufferBinding;

/**
 * What a kernel spends a step on, for the benchmarks that split a step's time by kind (bench
 * step-split): weight matmuls, attention (with the KV write; both apply RoPE), norms (with the
 * sample rows' gather), the embedding, the LM head, the sampler, and the sampling controls.
 */
export type KernelKind =
  | "weights"
  | "attention"
  | "norm"
  | "embedding"
  | "lmHead"
  | "sampler"
  | "controls";

export interface BoundKernel {
  /** Its kind, where a benchmark may want to leave it out (unset: counted as "other"). */
  readonly kind?: KernelKind;
  /** Records this kernel's dispatch for `rows` rows (tokens or sample rows) into `pass`. */
  encode(pass: GPUComputePassEncoder, rows: number): void;
  /**
   * Where set, the step records the kernel through this instead, in compute passes of its own:
   * the step's pass is ended before and a new one begun after. A bench's kernel timer wraps
   * kernels so (WebGPU writes timestamps only where a pass begins and ends).
   */
  readonly encodeApart?: (encoder: GPUCommandEncoder, rows: number) => void;
  /**
   * Row counts whose dispatches, between them, run each of its pipelines: the engine's warm-up
   * runs a step of each, so that no request is the first to compile one (llvmpipe compiles a
   * pipeline at its first dispatch). Absent: one pipeline, whatever the rows.
   */
  readonly variantRows?: readonly number[];
}

/**
 * A uniform of u32/f32 words. Word 0 is reserved for the row count, set by `setRows`; the rest are
 * static parameters given at creation, as numbers (u32) or `{ f32: x }`.
 */
export class ParamsUniform {
  readonly buffer: GPUBuffer;
  private rows = -1;

  constructor(private gpu: Gpu, words: (number | { f32: number })[]) {
    const data = new ArrayBuffer(Math.max(16, Math.ceil((words.length + 1) / 4) * 16));
    const u32 = new Uint32Array(data);
    const f32 = new Float32Array(data);
    words.forEach((w, i) => {
      if (typeof w === "number") u32[i + 1] = w;
      else f32[i + 1] = w.f32;
    });
    this.buffer = createUniform(gpu, data.byteLength, "params");
    gpu.device.queue.writeBuffer(this.buffer, 0, data);
  }

  setRows(rows: number): void {
    if (rows === this.rows) return;
    this.rows = rows;
    this.gpu.device.queue.writeBuffer(this.buffer, 0, new Uint32Array([rows]));
  }
}
