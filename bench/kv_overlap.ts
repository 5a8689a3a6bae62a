// Whether a KV copy overlaps a step's kernels (bench kv): FastSwitch assumes a swap stream beside
// inference, and WebGPU has one queue. A step of dummy rows (the engine's profile target, as the
// load's cost profile drives it) and a device-to-device copy are timed alone and together, in one
// command buffer and in two submissions, with the profile's queue timing.

import type { Engine } from "../engine/engine.ts";
import { type ProfileTarget, queueMs, roundTripMs } from "../engine/bench_api.ts";

/**
 * Queue times (ms, medians) of a copy and a step alone, and together in one or two submissions;
 * ratios are medians over repetitions of together / (step + copy) within one repetition.
 */
export interface OverlapMeasurement {
  rows: number;
  bytes: number;
  reps: number;
  computeMs: number;
  copyMs: number;
  /** The copy encoded into the step's own command buffer. */
  oneSubmissionMs: number;
  /** The copy submitted alone, then the step, back to back (the engine's order for "out" copies). */
  twoSubmissionsMs: number;
  /** 1: serial; (max(step, copy)) / (step + copy): fully overlapped. */
  oneSubmissionRatio: number;
  twoSubmissionsRatio: number;
  /** Share of the shorter of copy and compute hidden in one submission (0: none, 1: all). */
  overlap: number;
}

/** measureOverlap on `engine`'s own dummy steps (only while no request holds KV). */
export function engineOverlap(
  engine: Engine,
  o: { rows: number; bytes: number; reps?: number },
): Promise<OverlapMeasurement> {
  return engine.profileWith((t) => measureOverlap(t, o));
}

/**
 * Times a step of `rows` rows alone, a device-to-device copy of `bytes` alone, and both: in one
 * command buffer, and in two submissions back to back; `reps` (default 5) repetitions of all four.
 */
async function measureOverlap(
  t: ProfileTarget,
  o: { rows: number; bytes: number; reps?: number },
): Promise<OverlapMeasurement> {
  const reps = o.reps ?? 5;
  const timing = { reps, rt: await roundTripMs(t.gpu, reps), pointMs: Infinity };
  const dev = t.gpu.device;
  const usage = GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const src = dev.createBuffer({ size: o.bytes, usage, label: "profile.src" });
  const dst = dev.createBuffer({ size: o.bytes, usage, label: "profile.dst" });
  const copy = (e: GPUCommandEncoder) => e.copyBufferToBuffer(src, 0, dst, 0, o.bytes);
  const copyAlone = () => {
    const e = dev.createCommandEncoder();
    copy(e);
    dev.queue.submit([e.finish()]);
  };
  try {
    // All four back to back in each repetition, so a burst of load from elsewhere hits them alike.
    const variants = [
      () => copyAlone(),
      () => t.step(o.rows, 0),
      () => t.step(o.rows, 0, copy),
      () => (copyAlone(), t.step(o.rows, 0)),
    ];
    const once = { ...timing, reps: 1 };
    await queueMs(t.gpu, once, copyAlone); // touches the buffers first
    const runs: number[][] = [];
    for (let r = 0; r < reps; r++) {
      const ms = [];
      for (const v of variants) ms.push(await queueMs(t.gpu, once, v, { warm: false }));
      runs.push(ms);
    }
    const ratio = (v: number) => median(runs.map((ms) => ms[v] / (ms[0] + ms[1])));
    const hidden = median(
      runs.map(([x, c, one]) => (c + x - one) / Math.max(1e-9, Math.min(c, x))),
    );
    return {
      rows: o.rows,
      bytes: o.bytes,
      reps,
      copyMs: median(runs.map((ms) => ms[0])),
      computeMs: median(runs.map((ms) => ms[1])),
      oneSubmissionMs: median(runs.map((ms) => ms[2])),
      twoSubmissionsMs: median(runs.map((ms) => ms[3])),
      oneSubmissionRatio: ratio(2),
      twoSubmissionsRatio: ratio(3),
      overlap: Math.min(1, Math.max(0, hidden)),
    };
  } finally {
    src.destroy();
    dst.destroy();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}
