// Decode and prefill throughput of the whole engine on a generated SmolLM2-135M-shaped model.
// Reports tokens/s at batch 1, 4 and 16, one step per submission against multi-step decode (decode
// groups, runtime/decode_group.ts) measured in turn in one run, prefill tokens/s, and dispatches
// and submissions per step; with --quant, the same model as quantized GGUF files against f16
// (decode_quant.ts). measureDecodeBench returns the numbers, formatDecode the report (bench speed
// uses both).

import { z } from "zod";
import { Engine, openGpu, type StepEngine } from "../engine/engine.ts";
import { Runtime } from "../runtime/service.ts";
import { DEFAULT_DECODE_STEPS, DEFAULT_GROUP_MS } from "../runtime/bench_api.ts";
import { parseBenchFlags } from "./common/cli.ts";
import { type DecodeRun, GREEDY, measureDecode, prompt } from "./decode_measure.ts";
import { QUANT_KINDS, type QuantKind } from "./gguf_models.ts";
import { smolShapedModelDir } from "./common/smol_model.ts";
import { openForwardBench } from "./common/forward_bench.ts";
import { type StepTiming, stepTimingLines, timeStepKinds } from "./step_timing.ts";
import { KernelTimer } from "./common/kernel_timer.ts";

/** Cached positions each decode row attends over in the step split. */
const SPLIT_CONTEXT = 64;

export { SMOLLM2_SHAPE, smolShapedModelDir } from "./common/smol_model.ts";

const Flags = z.object({
  tokens: z.coerce.number().int().min(1).max(100_000).default(24),
  quant: z.string().transform((s, ctx) => {
    const list = [...new Set(s.split(",").map((a) => a.trim()).filter(Boolean))];
    const bad = list.find((a) => !(QUANT_KINDS as readonly string[]).includes(a));
    if (bad || list.length === 0) {
      ctx.addIssue({ code: "custom", message: `expected a list of ${QUANT_KINDS.join(", ")}` });
      return z.NEVER;
    }
    return list as QuantKind[];
  }).optional(),
  rounds: z.coerce.number().int().min(1).max(20).default(3),
  "decode-steps": z.coerce.number().int().min(2).max(64).default(DEFAULT_DECODE_STEPS),
  "group-ms": z.coerce.number().positive().default(DEFAULT_GROUP_MS),
  "matmul-kernel": z.enum(["auto", "storage", "texture"]).default("auto"),
});

export const USAGE = `usage: deno task bench decode [--tokens N] [--decode-steps N] [--group-ms MS]
                               [--matmul-kernel auto|storage|texture]
       deno task bench decode --quant KINDS [--tokens N] [--rounds N]

Decode and prefill throughput of the whole engine on a generated SmolLM2-135M-shaped model: tokens/s
at batch 1, 4 and 16, each one step per submission and with multi-step decode (up to
--decode-steps steps per submission, a group bounded to --group-ms), measured in turn; prefill
tokens/s; dispatches and submissions per step.

With --quant, the same model as GGUF files of each kind instead (written once, cached beside it):
decode tokens/s at batch 1 and 16 and weight bytes read per token, each as a ratio to f16 (always
included), the kinds interleaved round by round, medians reported.

  --tokens N    decode steps measured per batch size (default 24)
  --quant KINDS comma-separated: ${QUANT_KINDS.join(", ")}
  --rounds N    with --quant: measurements of each kind and batch size (default 3)
  --decode-steps N  most decode steps per submission for the multi-step runs (default ${DEFAULT_DECODE_STEPS})
  --group-ms MS the most time one group may take, as serve's (default ${DEFAULT_GROUP_MS})
  --matmul-kernel auto|storage|texture  where the weights live, as serve's (default auto)

Then the step split at batch 1 and 16: each kind of kernel's GPU time from timestamps, where the
adapter has them, and the fixed rest of the step.`;

export async function benchDecode(args: string[]): Promise<string> {
  const flags = parseBenchFlags(Flags, args);
  if (flags.quant) {
    const { measureDecodeQuant, formatDecodeQuant } = await import("./decode_quant.ts");
    return formatDecodeQuant(await measureDecodeQuant(flags.quant, flags.tokens, flags.rounds));
  }
  return formatDecode(
    await measureDecodeBench({
      tokens: flags.tokens,
      decodeSteps: flags["decode-steps"],
      groupMs: flags["group-ms"],
      matmulKernel: flags["matmul-kernel"],
    }),
  );
}

export interface DecodeOptions {
  /** Decode steps measured per batch size and mode. */
  tokens: number;
  /** Most decode steps per submission of the multi-step runs. */
  decodeSteps: number;
  /** The most time one decode group may take. */
  groupMs: number;
  matmulKernel: "auto" | "storage" | "texture";
  /** The timestamp split's steps per round and rounds (default 8 and 3). */
  split?: { steps: number; rounds: number };
}

/** One batch size, one step per submission and multi-step, measured in turn. */
export interface DecodeBatch {
  batch: number;
  single: DecodeRun;
  multi: DecodeRun;
}

/** What `bench decode` measured; formatDecode writes its report. */
export interface DecodeResult {
  adapter: string;
  dtype: string;
  weightLayout: string;
  /** Where the layout came from (flag, cache, measured); absent when the engine chose none. */
  layoutSource?: string;
  dispatchesPerStep: number;
  decodeSteps: number;
  groupMs: number;
  prefill: { tokens: number; seconds: number };
  batches: DecodeBatch[];
  /** Cached positions each decode row attends over in the step split. */
  splitContext: number;
  /** The step split from timestamps at batch 1 and 16; null where the adapter has none. */
  split: StepTiming[] | null;
}

export const DECODE_BATCHES = [1, 4, 16] as const;

export async function measureDecodeBench(opts: DecodeOptions): Promise<DecodeResult> {
  const steps = opts.tokens;
  const gpu = await openGpu();
  const modelDir = await smolShapedModelDir();
  let submits = 0;
  const queue = gpu.device.queue;
  const submit = queue.submit.bind(queue);
  queue.submit = (buffers: GPUCommandBuffer[]) => {
    submits++;
    return submit(buffers);
  };
  const engine = await Engine.load({
    modelDir,
    gpu,
    maxSlots: 16,
    maxRows: 256,
    gpuKvMb: 512,
    maxDecodeSteps: opts.decodeSteps,
    matmulKernel: opts.matmulKernel,
  });
  // Runtimes over the one engine, one at a time: each is closed (its steps back) before the next.
  const shared: StepEngine = {
    info: engine.info,
    step: (plan) => engine.step(plan),
    close: () => Promise.resolve(),
  };
  const runtimeWith = (decodeSteps: number) =>
    new Runtime(shared, {
      policy: "fcfs",
      maxQueue: 64,
      maxTokensLimit: 100_000,
      eosIds: [],
      decodeSteps,
      decodeGroupMs: opts.groupMs,
    });
  const runtime = runtimeWith(1);
  const V = engine.info.vocabSize;

  // Prefill: one 256-token prompt, one sampled token.
  const prefillTokens = 256;
  const t0 = performance.now();
  const h = runtime.submit({
    ids: prompt(0, prefillTokens, V),
    maxTokens: 1,
    sampling: GREEDY,
    stopIds: [],
  });
  for await (const _ of h.tokens);
  const prefillS = (performance.now() - t0) / 1000;
  await runtime.close();

  // One step per submission, then multi-step, for each batch size in turn.
  const batches: DecodeBatch[] = [];
  for (const batch of DECODE_BATCHES) {
    const runs = [];
    for (const decodeSteps of [1, opts.decodeSteps]) {
      const r = runtimeWith(decodeSteps);
      runs.push(await measureDecode(r, V, batch, steps, () => submits));
      await r.close();
    }
    batches.push({ batch, single: runs[0], multi: runs[1] });
  }
  const info = engine.info;
  const weightLayout = info.matmulKernel?.layout ?? "storage";
  await engine.close();

  // The step split (issue 22): each kind of kernel's GPU time from timestamps, where the adapter
  // has them; bench step-split has the removal method for any adapter.
  let split: StepTiming[] | null = null;
  if (KernelTimer.available(gpu)) {
    const timed = await openForwardBench(gpu, modelDir, SPLIT_CONTEXT, weightLayout);
    try {
      const steps = opts.split?.steps ?? 8, rounds = opts.split?.rounds ?? 3;
      split = await timeStepKinds(timed, [1, 16], SPLIT_CONTEXT, steps, rounds);
    } finally {
      await timed.close();
    }
  }
  return {
    adapter: info.adapter,
    dtype: info.dtype,
    weightLayout,
    layoutSource: info.matmulKernel?.source,
    dispatchesPerStep: info.dispatchesPerStep,
    decodeSteps: opts.decodeSteps,
    groupMs: opts.groupMs,
    prefill: { tokens: prefillTokens, seconds: prefillS },
    batches,
    splitContext: SPLIT_CONTEXT,
    split,
  };
}

/** `bench decode`'s Markdown report of a measurement. */
export function formatDecode(r: DecodeResult): string {
  const rows = [
    `| prefill, ${r.prefill.tokens}-token prompt | ${
      (r.prefill.tokens / r.prefill.seconds).toFixed(1)
    } tokens/s | time to first token ${(r.prefill.seconds * 1000).toFixed(0)} ms |`,
  ];
  const base = r.batches.find((b) => b.batch === 1)?.single.tokensPerS ?? NaN;
  const perStep = (run: DecodeRun) => run.submits / Math.max(1, run.steps);
  for (const { batch, single: one, multi: many } of r.batches) {
    rows.push(
      `| decode, batch ${batch} | ${one.tokensPerS.toFixed(1)} tokens/s | ${
        (one.tokensPerS / base).toFixed(2)
      }× batch 1; ${perStep(one).toFixed(2)} submissions/step over ${one.steps} steps |`,
      `| decode, batch ${batch}, multi-step (≤ ${r.decodeSteps}) | ${
        many.tokensPerS.toFixed(1)
      } tokens/s | ${(many.tokensPerS / one.tokensPerS).toFixed(2)}× one step per submission; ${
        perStep(many).toFixed(2)
      } submissions/step over ${many.steps} steps |`,
    );
  }
  const dispatches = r.dispatchesPerStep;
  const split = r.split
    ? stepTimingLines(r.split)
    : ["The adapter offers no timestamp queries: `bench step-split` splits a step by removal."];
  return [
    `### Decode benchmark (${r.adapter}, ${r.dtype}, SmolLM2-135M shape, random weights, ` +
    `weights in ${r.weightLayout}${r.layoutSource ? ` (${r.layoutSource})` : ""})`,
    "",
    `Dispatches per step: ${dispatches} (one step per submission); ${dispatches + 1} in a decode ` +
    `group (its rows moved on by one more dispatch per step). Multi-step: up to ${r.decodeSteps} ` +
    `steps per submission, a group bounded to ${r.groupMs} ms by the measured step time.`,
    "",
    "| measurement | throughput | notes |",
    "|---|---|---|",
    ...rows,
    "",
    `#### Step split (decode rows at position ${r.splitContext}, each step submitted and awaited)`,
    "",
    ...split,
  ].join("\n");
}
