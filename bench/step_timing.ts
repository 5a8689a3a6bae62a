// Where a decode step's GPU time goes, from timestamps (issue 22): on an adapter with the
// `timestamp-query` feature, the SmolLM2-shaped model's forward pass runs each kernel in a timed
// pass of its own (common/kernel_timer.ts), and the kernels' times are summed by kind. The step is
// also timed as it really runs (one pass, submitted and awaited), and what the kernels do not
// account for of that is the fixed cost: encoding, submission, the records' copy and the readback.
// The weight-independent part of the step is everything but the kernels that read weight matrices
// (the layers' matmuls and the LM head). Shared by bench decode and bench step-split.

import type { Engine } from "../engine/engine.ts";
import { KernelTimer, timedKernels } from "./common/kernel_timer.ts";
import { decodePlan, median, stepWith, timeSteps } from "./common/forward_bench.ts";

/** What the kinds are called in the table, in its order. */
const KIND_NAMES: [string, string][] = [
  ["weights", "weights (the layers' matmuls)"],
  ["lmHead", "LM head"],
  ["attention", "attention (KV write and attention, RoPE in both)"],
  ["norm", "sample-row gather and unfused norms (Qwen3 q/k)"],
  ["embedding", "embedding"],
  ["sampler", "sampler"],
  ["controls", "sampling controls (none here)"],
  ["other", "other kernels"],
];

/** Kinds that read a weight matrix: the rest of a step does not depend on the weights' bytes. */
const WEIGHT_KINDS = new Set(["weights", "lmHead"]);

export interface StepTiming {
  batch: number;
  /** Median ms of a whole step as it really runs (one pass, submitted and awaited). */
  stepMs: number;
  /** Median GPU ms per step of each kind, from timestamps. */
  kindMs: Map<string, number>;
  /** Kernels per step of each kind. */
  kindCount: Map<string, number>;
}

/**
 * Times `engine`'s decode step (common/forward_bench.ts's openForwardBench) at each batch size:
 * `rounds` rounds of `steps` steps each, untimed and with its kernels timed.
 */
export async function timeStepKinds(
  engine: Engine,
  batches: number[],
  context: number,
  steps: number,
  rounds: number,
): Promise<StepTiming[]> {
  const own = engine.kernels;
  const timer = new KernelTimer(engine.gpu, 2 * engine.info.dispatchesPerStep + 16);
  const timed = timedKernels(own, timer);
  const results: StepTiming[] = [];
  for (const batch of batches) {
    const plan = decodePlan(batch, context);
    const plainStep = stepWith(engine, own, plan);
    const timedStep = stepWith(engine, timed, plan);
    const stepMs: number[] = [];
    const perKind = new Map<string, number[]>();
    let kindCount = new Map<string, number>();
    for (let r = 0; r < rounds; r++) {
      stepMs.push(median(await timeSteps(plainStep, steps)));
      // The timed pass's steps, one by one: each one's kernels summed by kind.
      await timedStep();
      await timer.read();
      for (let i = 0; i < steps; i++) {
        await timedStep();
        const sums = new Map<string, number>(), counts = new Map<string, number>();
        for (const { label, ns } of await timer.read()) {
          sums.set(label, (sums.get(label) ?? 0) + ns / 1e6);
          counts.set(label, (counts.get(label) ?? 0) + 1);
        }
        for (const [kind, ms] of sums) {
          if (!perKind.has(kind)) perKind.set(kind, []);
          perKind.get(kind)!.push(ms);
        }
        kindCount = counts;
      }
    }
    results.push({
      batch,
      stepMs: median(stepMs),
      kindMs: new Map([...perKind].map(([k, v]) => [k, median(v)])),
      kindCount,
    });
  }
  engine.useKernels(own);
  timer.destroy();
  return results;
}

/** GPU ms per step of the kernels that read weight matrices (the layers' matmuls, the LM head). */
export function weightKernelsMs(t: StepTiming): number {
  return [...t.kindMs].filter(([k]) => WEIGHT_KINDS.has(k)).reduce((a, [, v]) => a + v, 0);
}

const ms = (x: number) => x.toFixed(2);
const pct = (x: number, of: number) => `${(100 * x / of).toFixed(0)}%`;

/** A markdown table per batch size of a step's split by kind, and its weight-independent part. */
export function stepTimingLines(timings: StepTiming[]): string[] {
  const lines: string[] = [];
  for (const t of timings) {
    const kernelsMs = [...t.kindMs.values()].reduce((a, b) => a + b, 0);
    const fixed = Math.max(0, t.stepMs - kernelsMs);
    const weightMs = weightKernelsMs(t);
    const rows = KIND_NAMES.filter(([k]) => t.kindMs.has(k)).map(([k, name]) =>
      `| ${name} | ${t.kindCount.get(k) ?? 0} | ${ms(t.kindMs.get(k)!)} | ${
        pct(t.kindMs.get(k)!, t.stepMs)
      } |`
    );
    const dispatches = [...t.kindCount.values()].reduce((a, b) => a + b, 0);
    lines.push(
      `#### Batch ${t.batch}: ${ms(t.stepMs)} ms per step, split by GPU timestamps`,
      "",
      "| part | kernels per step | GPU ms per step | share of the step |",
      "|---|---|---|---|",
      ...rows,
      `| fixed (the step − its kernels: encode, submit, copy, readback) | — | ${ms(fixed)} | ${
        pct(fixed, t.stepMs)
      } |`,
      "",
      `Kernels timed per step: ${dispatches}. Weight-independent part (the step less the ` +
        `kernels that read weight matrices): ${ms(t.stepMs - weightMs)} ms, ${
          pct(t.stepMs - weightMs, t.stepMs)
        } of the step.` +
        (kernelsMs > t.stepMs
          ? ` The kernels' timed sum exceeds the untimed step by ${
            ms(kernelsMs - t.stepMs)
          } ms: a pass per kernel costs time of its own, so shares are of the kernels' sum's scale.`
          : ""),
      "",
    );
  }
  return lines;
}
