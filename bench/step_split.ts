// Where a decode step's time goes (issue 22): the SmolLM2-135M-shaped random model decodes at
// batch 1 and 16 with the forward pass whole and without one kind of kernel at a time (the
// engine's kernel list filtered: common/forward_bench.ts), alternating, medians; each kind's share
// is the difference, and what is left with no kernel at all is the step's fixed cost (encoding,
// submission, the records' copy and readback). Per-kernel GPU timestamps would be finer, but
// WebGPU places them only at pass boundaries and the forward pass is one compute pass, so removal
// is the method on every adapter. A line through two models differing only in weight bytes (f16
// and Q4_0 GGUF) gives the other estimate of the weight-independent part, as the issue's did.
// measureStepSplit returns the numbers, formatStepSplit the report (bench speed uses both).

import { z } from "zod";
import { type ForwardKernels, type Gpu, type KernelKind, openGpu } from "../engine/engine.ts";
import { greedyChunks } from "../engine/bench_api.ts";
import { parseBenchFlags } from "./common/cli.ts";
import { smolShapedModelDir } from "./common/smol_model.ts";
import {
  decodePlan,
  kernelsByKind,
  median,
  openForwardBench,
  type Step,
  stepWith,
  timeSteps,
  withoutKinds,
  withPlainSampler,
} from "./common/forward_bench.ts";
import { KernelTimer } from "./common/kernel_timer.ts";
import { smolShapedGguf } from "./gguf_models.ts";
import { type StepTiming, stepTimingLines, timeStepKinds } from "./step_timing.ts";

const Flags = z.object({
  batch: z.string().default("1,16").transform((s, ctx) => {
    const list = s.split(",").map((a) => Number(a.trim()));
    if (list.some((b) => !Number.isInteger(b) || b < 1 || b > 16)) {
      ctx.addIssue({ code: "custom", message: "expected batch sizes in 1..16, comma-separated" });
      return z.NEVER;
    }
    return [...new Set(list)];
  }),
  steps: z.coerce.number().int().min(1).max(1000).default(8),
  rounds: z.coerce.number().int().min(1).max(50).default(5),
  context: z.coerce.number().int().min(1).max(4096).default(64),
  line: z.enum(["on", "off"]).default("on"),
  /** Another model (a directory or GGUF file) in place of the SmolLM2-135M-shaped one. */
  model: z.string().min(1).optional(),
});

export const USAGE =
  `usage: deno task bench step-split [--batch 1,16] [--steps N] [--rounds N] [--context N] [--line on|off]

Where a decode step of the SmolLM2-135M-shaped random model goes: weights (the layers' matmuls),
attention (with the KV write; both apply RoPE), norms and embedding, the LM head, the sampler, and the fixed
rest (encoding, submission, readback), each measured by building the forward pass without it; the
greedy sampler against the one-workgroup sampler; dispatches per step; and the part of a batch-1 f16
step that does not depend on the weights, from the removal and from a line through f16 and Q4_0;
what as many trivial dispatches cost; and the whole step with two in flight. Each other step is
submitted and its records awaited before the next.

  --batch LIST   batch sizes, 1..16 (default 1,16)
  --steps N      timed steps per variant per round (default 8)
  --rounds N     rounds; the variants alternate within each (default 5)
  --context N    each row's position: attention reads N cached positions (default 64)
  --line on|off  also load the Q4_0 GGUF and fit bytes -> ms through two points (default on;
                 off with --model)
  --model PATH   split another model's step (a model directory or .gguf file), e.g. the
                 gemma3-270m file bench model-shape writes: where a 262k-row LM head's time goes`;

const ALL_KINDS: KernelKind[] = ["weights", "attention", "norm", "embedding", "lmHead", "sampler"];

interface Variant {
  name: string;
  /** The variant's kernel list, made from the engine's own. */
  kernels: (own: ForwardKernels) => ForwardKernels;
}

const without = (...kinds: KernelKind[]) => (own: ForwardKernels) =>
  withoutKinds(own, new Set(kinds));

const VARIANTS: Variant[] = [
  { name: "whole step", kernels: (own) => own },
  { name: "one-workgroup sampler", kernels: withPlainSampler },
  { name: "no weights", kernels: without("weights") },
  { name: "no attention", kernels: without("attention") },
  { name: "no norms/embedding", kernels: without("norm", "embedding") },
  { name: "no LM head", kernels: without("lmHead") },
  { name: "no sampler", kernels: without("sampler") },
  { name: "no kernels", kernels: without(...ALL_KINDS) },
];

/**
 * A step of `n` one-workgroup dispatches of a kernel that stores one word, each with its pipeline
 * and bind group set as the forward pass's kernels are, then a copy and a readback as a step's
 * records: with n = 0 and n = the step's dispatches, what dispatching alone costs on the adapter.
 */
function dispatchOnly(gpu: Gpu, n: number): Step {
  const code = `@group(0) @binding(0) var<storage, read_write> sink: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lane: u32) { if (lane == 0u) { sink[0] = sink[0] + 1u; } }`;
  const module = gpu.device.createShaderModule({ code });
  const pipeline = gpu.device.createComputePipeline({
    layout: "auto",
    compute: { module, entryPoint: "main" },
  });
  const sink = gpu.device.createBuffer({
    size: 16,
    usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC,
  });
  const group = gpu.device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: [{ binding: 0, resource: { buffer: sink } }],
  });
  const read = gpu.device.createBuffer({
    size: 16,
    usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
  });
  return async () => {
    const encoder = gpu.device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    for (let i = 0; i < n; i++) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(1);
    }
    pass.end();
    encoder.copyBufferToBuffer(sink, 0, read, 0, 16);
    gpu.device.queue.submit([encoder.finish()]);
    await read.mapAsync(GPUMapMode.READ);
    read.unmap();
  };
}

/** Median ms per step of each named step, alternating them round by round. */
async function alternate(
  variants: Map<string, Step>,
  steps: number,
  rounds: number,
): Promise<Map<string, number>> {
  const perRound = new Map<string, number[]>([...variants.keys()].map((k) => [k, []]));
  const names = [...variants.keys()];
  for (let r = 0; r < rounds; r++) {
    // Rotated each round, so no variant always follows the same one.
    for (let i = 0; i < names.length; i++) {
      const name = names[(i + r) % names.length];
      perRound.get(name)!.push(median(await timeSteps(variants.get(name)!, steps)));
    }
  }
  return new Map([...perRound].map(([k, v]) => [k, median(v)]));
}

const ms = (x: number) => x.toFixed(2);
const pct = (x: number, of: number) => `${(100 * x / of).toFixed(0)}%`;

export async function benchStepSplit(args: string[]): Promise<string> {
  return formatStepSplit(await measureStepSplit(parseBenchFlags(Flags, args)));
}

export type StepSplitOptions = z.infer<typeof Flags>;

/** The default options, as `bench step-split` with no flags runs. */
export const STEP_SPLIT_DEFAULTS: StepSplitOptions = Flags.parse({});

/** One batch size: median ms per step of each named build (VARIANTS' names and the extras). */
export interface StepSplitBatch {
  batch: number;
  ms: Record<string, number>;
}

/** What `bench step-split` measured; formatStepSplit writes its report. */
export interface StepSplitResult {
  adapter: string;
  f16: boolean;
  options: StepSplitOptions;
  /** Dispatches per step of the whole step (greedy sampler). */
  dispatches: number;
  /** Kernels per step of each kind. */
  kernelsByKind: Record<string, number>;
  /** The greedy sampler's chunk workgroups per row. */
  greedyChunks: number;
  batches: StepSplitBatch[];
  /** Weight bytes of the two models the line runs through; null without --line on. */
  line: { f16Bytes: number; q4Bytes: number } | null;
  /** The split from GPU timestamps; null where the adapter has no timestamp queries. */
  timestamps: StepTiming[] | null;
}

export async function measureStepSplit(opts: StepSplitOptions): Promise<StepSplitResult> {
  const gpu = await openGpu();
  const timestamps = KernelTimer.available(gpu);
  const f16 = await openForwardBench(gpu, opts.model ?? await smolShapedModelDir(), opts.context);
  const q4 = opts.line === "on" && !opts.model
    ? await openForwardBench(gpu, await smolShapedGguf("q4_0"), opts.context)
    : undefined;
  try {
    const own = f16.kernels;
    const kernels = new Map(VARIANTS.map((v) => [v.name, v.kernels(own)]));
    // A greedy step's: the greedy sampler's two dispatches.
    const dispatches = f16.info.dispatchesPerStep;
    const batches: StepSplitBatch[] = [];
    for (const batch of opts.batch) {
      const plan = decodePlan(batch, opts.context);
      const steps = new Map<string, Step>(
        [...kernels].map(([name, k]) => [name, stepWith(f16, k, plan)]),
      );
      if (q4) steps.set("Q4_0 whole step", () => q4.step(plan));
      // Two steps submitted before either is awaited, as the serving loop keeps them.
      const whole = stepWith(f16, own, plan);
      steps.set("two in flight", () => Promise.all([whole(), whole()]));
      steps.set("dispatches only", dispatchOnly(gpu, dispatches));
      steps.set("no dispatches", dispatchOnly(gpu, 0));
      const t = await alternate(steps, opts.steps, opts.rounds);
      batches.push({ batch, ms: Object.fromEntries(t) });
    }
    f16.useKernels(own);
    return {
      adapter: gpu.adapterName,
      f16: gpu.f16,
      options: opts,
      dispatches,
      kernelsByKind: Object.fromEntries(kernelsByKind(own)),
      greedyChunks: greedyChunks(f16.info.vocabSize),
      batches,
      line: q4 ? { f16Bytes: f16.info.weightBytes, q4Bytes: q4.info.weightBytes } : null,
      timestamps: timestamps
        ? await timeStepKinds(f16, opts.batch, opts.context, opts.steps, opts.rounds)
        : null,
    };
  } finally {
    await f16.close();
    await q4?.close();
  }
}

/**
 * The part of a batch-1 step that does not depend on the weights, by removal: the whole step less
 * the weights' and the LM head's shares. Null without a batch-1 measurement.
 */
export function weightIndependentByRemoval(
  r: StepSplitResult,
): { stepMs: number; weightsMs: number; independentMs: number } | null {
  const b1 = r.batches.find((b) => b.batch === 1);
  if (!b1) return null;
  const full = b1.ms["whole step"];
  const weightsMs = (full - b1.ms["no weights"]) + (full - b1.ms["no LM head"]);
  return { stepMs: full, weightsMs, independentMs: full - weightsMs };
}

/** `bench step-split`'s Markdown report of a measurement. */
export function formatStepSplit(r: StepSplitResult): string {
  const o = r.options;
  const dispatches = r.dispatches;
  const count = (k: KernelKind | "other") => r.kernelsByKind[k] ?? 0;
  const lines = [
    `### Step split (${r.adapter}, ${r.f16 ? "f16" : "f32"}, ` +
    `${r.options.model ?? "SmolLM2-135M shape"}, ` +
    `random weights, context ${o.context})`,
    "",
    `Each part is the whole step minus the step built without it` +
    (r.timestamps
      ? "; the GPU timestamps' split (each kernel in a timed pass of its own) follows the removal's. "
      : " (the adapter offers no timestamp queries, so there is no timestamp split). ") +
    `Each step is submitted ` +
    `and awaited alone (the serving loop keeps two in flight, hiding part of the fixed cost). ` +
    `Medians of ${o.rounds} rounds × ${o.steps} steps, the variants alternating.`,
    "",
    `Dispatches per step: ${dispatches} with the greedy sampler ` +
    `(${dispatches - 1} with the one-workgroup sampler): weights ${count("weights")}, ` +
    `attention ${count("attention")}, norms ${count("norm")}, embedding ${count("embedding")}, ` +
    `LM head ${count("lmHead")}, sampler 2 (greedy: ${r.greedyChunks} chunk workgroups per row, ` +
    `then one per row) or 1 (one workgroup per row)` +
    (count("other") ? `, unlabelled ${count("other")}` : "") + ".",
    "",
  ];

  for (const { batch, ms: t } of r.batches) {
    const full = t["whole step"];
    const fixed = t["no kernels"];
    const part = (name: string) => full - t[name];
    const parts: [string, number][] = [
      ["weights (layers' matmuls)", part("no weights")],
      ["attention (KV write and attention, RoPE in both)", part("no attention")],
      ["gather, unfused norms and embedding", part("no norms/embedding")],
      ["LM head", part("no LM head")],
      ["sampler (greedy, many workgroups)", part("no sampler")],
      ["fixed (encode, submit, readback)", fixed],
    ];
    const rest = full - parts.reduce((s, [, x]) => s + x, 0);
    const plainSampler = t["one-workgroup sampler"] - t["no sampler"];
    const dispatching = t["dispatches only"] - t["no dispatches"];
    lines.push(
      `#### Batch ${batch}: ${ms(full)} ms per step (${(1000 * batch / full).toFixed(1)} tokens/s)`,
      "",
      "| part | ms per step | share |",
      "|---|---|---|",
      ...parts.map(([name, x]) => `| ${name} | ${ms(x)} | ${pct(x, full)} |`),
      `| not additive (whole − the parts above) | ${ms(rest)} | ${pct(rest, full)} |`,
      "",
      `With two steps in flight (as the serving loop runs them): ${
        ms(t["two in flight"] / 2)
      } ms per step.`,
      "",
      `Dispatch overhead, inside the kinds' shares above: ${dispatches} one-workgroup dispatches ` +
        `of a kernel that stores one word take ${ms(dispatching)} ms (${
          pct(dispatching, full)
        } of the step) more than a step with none (${ms(t["no dispatches"])} ms).`,
      "",
      `Sampler: greedy ${ms(part("no sampler"))} ms against the one-workgroup sampler's ` +
        `${ms(plainSampler)} ms (whole step with it: ${ms(t["one-workgroup sampler"])} ms).`,
      "",
    );
  }

  const removal = weightIndependentByRemoval(r);
  if (removal) {
    const { stepMs: batch1Whole, weightsMs: batch1Weights, independentMs: indep } = removal;
    lines.push(
      "#### The part of a batch-1 f16 step that does not depend on the weights (goal ≤ 25%)",
      "",
      `- by removal: whole step ${ms(batch1Whole)} ms − weights and LM head ${
        ms(batch1Weights)
      } ms = ${ms(indep)} ms, ${pct(indep, batch1Whole)} of the step (a lower bound: the ` +
        `matmuls' own dispatch cost counts as weights here)`,
    );
    if (r.line) {
      const q4Whole = r.batches.find((b) => b.batch === 1)!.ms["Q4_0 whole step"];
      const { f16Bytes: b16, q4Bytes: b4 } = r.line;
      const slope = (batch1Whole - q4Whole) / (b16 - b4);
      const intercept = batch1Whole - slope * b16;
      lines.push(
        `- by a line through two points: f16 ${(b16 / 2 ** 20).toFixed(0)} MiB in ${
          ms(batch1Whole)
        } ms, Q4_0 ${(b4 / 2 ** 20).toFixed(0)} MiB in ${ms(q4Whole)} ms: ${
          ms(intercept)
        } ms at zero bytes, ${pct(intercept, batch1Whole)} of the f16 step`,
      );
    }
    lines.push("");
  }

  if (r.timestamps) {
    lines.push("#### From GPU timestamps", "", ...stepTimingLines(r.timestamps));
  }
  return lines.join("\n");
}
