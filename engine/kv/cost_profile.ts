// Measures the cost model's primitives on this adapter at load: the round trip, host → device and
// device → host copies (per copy and per byte), and steps of two row counts with and without
// sampling. Each figure is queue time: the operations are submitted, one wait ends them, and the round trip
// is subtracted. The minimum over a few repetitions stands for each point (the machine is shared,
// so noise only adds time); slow steps get fewer repetitions, so a large model's profile costs a
// few of its steps, and the demo model's well under a second.
//
// Whether a copy overlaps a step's kernels is measured by the kv benchmark (bench/kv_overlap.ts,
// over this file's ProfileTarget and queueMs): it needs a copy about as long as a step to be
// visible above the noise, which a large model's step makes too slow for load time. The load's
// model assumes none (overlap 0).

import type { Gpu } from "../gpu/device.ts";
import { type CostModel, fitLine, type Line, PROFILE_WEIGHT, sumsOf } from "./cost_model.ts";

/** What the profile drives: the engine's steps on dummy rows (their KV and tables are scratch). */
export interface ProfileTarget {
  gpu: Gpu;
  numLayers: number;
  maxRows: number;
  maxSlots: number;
  ringSize: number;
  /**
   * Submits one step of `rows` rows, sampling the first `samples` of them, with `prelude` encoded
   * into its command buffer first; returns its records.
   */
  step(rows: number, samples: number, prelude?: (e: GPUCommandEncoder) => void): Promise<unknown>;
}

export interface ProfileOptions {
  /** Most repetitions per point (default 3). */
  reps?: number;
  /** Row counts of the compute points (default 1 and 8, within maxRows). */
  rows?: number[];
  /** A point stops repeating once it has taken this long (default 100 ms). */
  pointMs?: number;
}

/** Copy points: 1 MiB as SMALL_COPIES copies and as one, and LARGE_BYTES as one. */
const SMALL_COPIES = 256;
const MIB = 1 << 20;
const LARGE_BYTES = 16 * MIB;

/** How queueMs repeats a point: at most `reps` runs, stopping after `pointMs`, less `rt`. */
export interface Timing {
  reps: number;
  /** The round trip (roundTripMs), subtracted from every point. */
  rt: number;
  pointMs: number;
}

/** Fits the cost model (overlap 0: see the header). */
export async function profileCosts(
  t: ProfileTarget,
  opts: ProfileOptions = {},
): Promise<CostModel> {
  const reps = opts.reps ?? 3;
  const timing = { reps, rt: await roundTripMs(t.gpu, reps), pointMs: opts.pointMs ?? 100 };
  const hostToDevice = await copyLine((b, n) => hostToDeviceMs(t.gpu, b, n, timing));
  const deviceToHost = await copyLine((b, n) => deviceToHostMs(t.gpu, b, n, timing));
  const prefetch = await copyLine((b, n) => prefetchMs(t.gpu, b, n, timing));
  // Two row counts fit the layer line exactly; the sampling tail is the same step's extra time.
  const rowCounts = unique((opts.rows ?? [1, 8]).map((n) => Math.min(n, t.maxRows)));
  const layerPoints: [number, number][] = [], samplePoints: [number, number][] = [];
  for (const n of rowCounts) {
    const plain = await stepMs(t, n, 0, timing);
    layerPoints.push([n, plain / t.numLayers]);
    const s = Math.min(n, t.maxSlots);
    samplePoints.push([s, Math.max(0, (await stepMs(t, n, s, timing)) - plain)]);
  }
  return {
    numLayers: t.numLayers,
    roundTripMs: timing.rt,
    layer: fitLine(layerPoints),
    sample: fitLine(samplePoints),
    hostToDevice,
    deviceToHost,
    prefetch,
    overlap: 0,
    layerFit: sumsOf(layerPoints, PROFILE_WEIGHT),
  };
}

/**
 * A copy line from differences, so that what every wait costs anyway (a staging buffer, a map)
 * cancels: per copy, 1 MiB as many copies less 1 MiB as one; per byte, LARGE_BYTES less 1 MiB.
 */
async function copyLine(
  waitMs: (bytesPerCopy: number, copies: number) => Promise<number>,
): Promise<Line> {
  const many = await waitMs(MIB / SMALL_COPIES, SMALL_COPIES);
  const one = await waitMs(MIB, 1);
  const large = await waitMs(LARGE_BYTES, 1);
  return {
    fixedMs: Math.max(0, (many - one) / (SMALL_COPIES - 1)),
    perUnitMs: Math.max(0, (large - one) / (LARGE_BYTES - MIB)),
  };
}

/** Queue time of one step of `rows` rows sampling `samples` (the engine's warm-up ran it). */
function stepMs(t: ProfileTarget, rows: number, samples: number, timing: Timing): Promise<number> {
  return queueMs(t.gpu, timing, () => t.step(rows, samples), { warm: false });
}

/** Queue time of `count` queue.writeBuffer calls of `bytes` each, to consecutive ranges. */
async function hostToDeviceMs(
  gpu: Gpu,
  bytes: number,
  count: number,
  timing: Timing,
): Promise<number> {
  const buffer = gpu.device.createBuffer({
    size: count * bytes,
    usage: GPUBufferUsage.COPY_DST,
    label: "profile.h2d",
  });
  const host = new Uint8Array(count * bytes).fill(1);
  try {
    return await queueMs(gpu, timing, () => {
      for (let i = 0; i < count; i++) {
        gpu.device.queue.writeBuffer(buffer, i * bytes, host, i * bytes, bytes);
      }
    });
  } finally {
    buffer.destroy();
  }
}

/**
 * Queue time of `count` prefetches of `bytes` each, the way KvTransfers does them: host bytes
 * staged in a mappable buffer, each copied into the device between two compute passes.
 */
async function prefetchMs(gpu: Gpu, bytes: number, count: number, timing: Timing): Promise<number> {
  const dev = gpu.device;
  const dst = dev.createBuffer({
    size: count * bytes,
    usage: GPUBufferUsage.COPY_DST,
    label: "profile.prefetch",
  });
  const host = new Uint8Array(count * bytes).fill(1);
  const prefetch = () => {
    const staging = dev.createBuffer({
      size: count * bytes,
      usage: GPUBufferUsage.MAP_WRITE | GPUBufferUsage.COPY_SRC,
      mappedAtCreation: true,
    });
    new Uint8Array(staging.getMappedRange()).set(host);
    staging.unmap();
    const e = dev.createCommandEncoder();
    e.beginComputePass().end();
    for (let i = 0; i < count; i++) {
      e.copyBufferToBuffer(staging, i * bytes, dst, i * bytes, bytes);
      e.beginComputePass().end();
    }
    dev.queue.submit([e.finish()]);
    return dev.queue.onSubmittedWorkDone().then(() => staging.destroy());
  };
  try {
    return await queueMs(gpu, timing, prefetch);
  } finally {
    dst.destroy();
  }
}

/** Queue time of `count` device → host copies of `bytes` each, the way KvTransfers does them. */
async function deviceToHostMs(
  gpu: Gpu,
  bytes: number,
  count: number,
  timing: Timing,
): Promise<number> {
  const dev = gpu.device;
  const src = dev.createBuffer({
    size: count * bytes,
    usage: GPUBufferUsage.COPY_SRC,
    label: "profile.d2h",
  });
  const host = new Uint8Array(count * bytes);
  const copyOut = async () => {
    const staging = dev.createBuffer({
      size: count * bytes,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    });
    const e = dev.createCommandEncoder();
    for (let i = 0; i < count; i++) {
      e.copyBufferToBuffer(src, i * bytes, staging, i * bytes, bytes);
    }
    dev.queue.submit([e.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    host.set(new Uint8Array(staging.getMappedRange()));
    staging.unmap();
    staging.destroy();
  };
  try {
    return await queueMs(gpu, timing, copyOut);
  } finally {
    src.destroy();
  }
}

/** Latency of waiting for an empty submission: the floor under every wait. */
export async function roundTripMs(gpu: Gpu, reps: number): Promise<number> {
  let best = Infinity;
  for (let i = 0; i < Math.max(1, reps); i++) {
    const t0 = performance.now();
    gpu.device.queue.submit([]);
    await gpu.device.queue.onSubmittedWorkDone();
    best = Math.min(best, performance.now() - t0);
  }
  return best;
}

/**
 * Runs `op`, then waits for the queue (and what `op` returned): the best of up to `reps` runs
 * (fewer once `pointMs` has passed), less the round trip. With `warm`, a first unmeasured run
 * touches fresh memory first.
 */
export async function queueMs(
  gpu: Gpu,
  timing: Timing,
  op: () => unknown,
  { warm = true } = {},
): Promise<number> {
  let best = Infinity;
  const start = performance.now();
  for (let r = warm ? -1 : 0; r < Math.max(1, timing.reps); r++) {
    const t0 = performance.now();
    const pending = op();
    gpu.device.queue.submit([]);
    await Promise.all([pending, gpu.device.queue.onSubmittedWorkDone()]);
    if (r >= 0) best = Math.min(best, performance.now() - t0);
    if (r >= 0 && performance.now() - start > timing.pointMs) break;
  }
  return Math.max(0, best - timing.rt);
}

function unique(xs: number[]): number[] {
  return xs.filter((x, i) => xs.indexOf(x) === i);
}
