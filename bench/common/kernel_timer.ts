// GPU time per kernel, for benchmarks, on adapters with the `timestamp-query` feature. WebGPU
// writes timestamps only where a pass begins and ends, so a timed step runs each kernel in a compute
// pass of its own (timedKernels wraps an engine's kernel list so); that adds a pass boundary per
// kernel, which is why the figures serve to split a step among kernels, while the step itself is
// timed untimed (bench decode).

import type { BoundKernel, ForwardKernels, Gpu } from "../../engine/engine.ts";

/** One timed kernel: what it was and how long the GPU spent between its pass's two timestamps. */
export interface KernelTime {
  label: string;
  ns: number;
}

export class KernelTimer {
  private readonly querySet: GPUQuerySet;
  private readonly resolved: GPUBuffer;
  private readonly readback: GPUBuffer;
  private labels: string[] = [];

  /** Whether `gpu`'s device can time passes. */
  static available(gpu: Gpu): boolean {
    return gpu.device.features.has("timestamp-query");
  }

  /** Room for `capacity` kernels per read. */
  constructor(private gpu: Gpu, readonly capacity: number) {
    if (!KernelTimer.available(gpu)) {
      throw new Error("kernel timer: the device lacks the timestamp-query feature");
    }
    const count = 2 * capacity;
    this.querySet = gpu.device.createQuerySet({ type: "timestamp", count });
    this.resolved = gpu.device.createBuffer({
      size: count * 8,
      usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
    });
    this.readback = gpu.device.createBuffer({
      size: count * 8,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
  }

  /** A compute pass of its own for the kernel `label`, its begin and end timestamped. */
  beginPass(encoder: GPUCommandEncoder, label: string): GPUComputePassEncoder {
    const i = this.labels.length;
    if (i >= this.capacity) {
      throw new RangeError(`kernel timer: more than ${this.capacity} kernels`);
    }
    this.labels.push(label);
    return encoder.beginComputePass({
      timestampWrites: {
        querySet: this.querySet,
        beginningOfPassWriteIndex: 2 * i,
        endOfPassWriteIndex: 2 * i + 1,
      },
    });
  }

  /**
   * Each timed kernel's GPU time, in encoding order, once the submissions that timed them are
   * done; then empties. Call it after submitting them.
   */
  async read(): Promise<KernelTime[]> {
    const labels = this.labels;
    this.labels = [];
    if (labels.length === 0) return [];
    // Resolved in a submission of its own, queued after the timed ones: a query set keeps its
    // results across submissions, so the timed steps need no command of the timer's.
    const n = 2 * labels.length;
    const encoder = this.gpu.device.createCommandEncoder();
    encoder.resolveQuerySet(this.querySet, 0, n, this.resolved, 0);
    encoder.copyBufferToBuffer(this.resolved, 0, this.readback, 0, n * 8);
    this.gpu.device.queue.submit([encoder.finish()]);
    await this.readback.mapAsync(GPUMapMode.READ, 0, labels.length * 16);
    const stamps = new BigUint64Array(this.readback.getMappedRange(0, labels.length * 16).slice(0));
    this.readback.unmap();
    // A clock that steps back (some drivers reset it between passes) counts as zero, not negative.
    return labels.map((label, i) => ({
      label,
      ns: Math.max(0, Number(stamps[2 * i + 1] - stamps[2 * i])),
    }));
  }

  destroy(): void {
    this.querySet.destroy();
    this.resolved.destroy();
    this.readback.destroy();
  }
}

/**
 * `kernels` with every kernel, the sampling controls' too, in a pass of its own timed by `timer`
 * and labelled by its kind ("other" when it has none). Give it to the engine (useKernels), run
 * steps, then read the timer.
 */
export function timedKernels(kernels: ForwardKernels, timer: KernelTimer): ForwardKernels {
  const timed = (k: BoundKernel): BoundKernel => ({
    kind: k.kind,
    variantRows: k.variantRows,
    encode: (pass, rows) => k.encode(pass, rows),
    encodeApart: (encoder, rows) => {
      const pass = timer.beginPass(encoder, k.kind ?? "other");
      k.encode(pass, rows);
      pass.end();
    },
  });
  const { head, layers, tail, adjust, samplers, count } = kernels;
  return {
    head: head.map(timed),
    layers: layers.map((l) => l.map(timed)),
    tail: tail.map(timed),
    adjust: timed(adjust),
    samplers: {
      plain: timed(samplers.plain),
      top: timed(samplers.top),
      greedy: timed(samplers.greedy),
    },
    count: timed(count),
  };
}
