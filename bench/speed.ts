// `bench speed`: issue 22's "Must show" scorecard in one run, one process — decode with multi-step
// against one step per submission at batch 1, 4 and 16 (with the timestamp step split and the
// dispatches per step), Q4_0 against f16, the step split by removal, every matvec against the
// read rooflines, and decode against llama.cpp's CPU path — each section's report as its own
// bench prints it, then a goals table computed from the sections' typed results
// (speed_goals.ts). llama.cpp that cannot run becomes a "not measured" row, not a failed bench.

import { z } from "zod";
import { DEFAULT_DECODE_STEPS, DEFAULT_GROUP_MS } from "../runtime/bench_api.ts";
import { openGpu } from "../engine/engine.ts";
import { QUANT_TYPES } from "../engine/bench_api.ts";
import { parseBenchFlags } from "./common/cli.ts";
import { QUANT_KINDS, type QuantKind } from "./gguf_models.ts";
import { formatDecode, measureDecodeBench } from "./decode.ts";
import { formatDecodeQuant, measureDecodeQuant } from "./decode_quant.ts";
import { matvecMeasurement, matvecTable } from "./kernels.ts";
import { formatReport, LLAMACPP_DEFAULTS, measureLlamaCpp } from "./llamacpp.ts";
import { formatStepSplit, measureStepSplit, STEP_SPLIT_DEFAULTS } from "./step_split.ts";
import { goalsTable, type NotRun, scorecardFigures, type SpeedResults } from "./speed_goals.ts";

const kindList = z.string().transform((s, ctx) => {
  const list = [...new Set(s.split(",").map((a) => a.trim()).filter(Boolean))];
  const bad = list.find((a) => !(QUANT_KINDS as readonly string[]).includes(a));
  if (bad || list.length === 0) {
    ctx.addIssue({ code: "custom", message: `expected a list of ${QUANT_KINDS.join(", ")}` });
    return z.NEVER;
  }
  return list as QuantKind[];
});

/** Matvec formats: the weight dtype's (f16 or f32) and each quantized one. */
const MATVEC_NAMES: string[] = ["f16", "f32", ...QUANT_TYPES];

const Flags = z.object({
  tokens: z.coerce.number().int().min(1).max(10_000).optional(),
  rounds: z.coerce.number().int().min(1).max(20).optional(),
  quant: kindList.optional(),
  formats: z.string().refine(
    (s) => s === "all" || s.split(",").every((f) => MATVEC_NAMES.includes(f.trim())),
    { message: `expected all, or a list of ${["f16", "f32", ...QUANT_TYPES].join(", ")}` },
  ).optional(),
  shape: z.string().optional(),
  llamacpp: z.enum(["on", "off"]).default("on"),
  "llamacpp-tokens": z.coerce.number().int().min(1).max(10_000).optional(),
  "decode-steps": z.coerce.number().int().min(2).max(64).default(DEFAULT_DECODE_STEPS),
});

/** What a run measures unless a flag says otherwise: in full, and with --quick. */
const MODES = {
  full: {
    tokens: 24,
    rounds: 3,
    quant: ["q4_0", "q4_k_m"] as QuantKind[],
    formats: "f16,q8_0,q4_0,q4_k",
    shape: undefined as string | undefined,
    llamacppTokens: 64,
    llamacppKinds: ["f16", "q4_0"] as QuantKind[],
    llamacppThreads: [1, 2],
    split: { steps: 8, rounds: 3 },
    stepSplit: { batch: [1, 16], steps: 8, rounds: 5, line: "on" as const },
  },
  quick: {
    tokens: 4,
    rounds: 1,
    quant: ["q4_0", "q4_k_m"] as QuantKind[],
    formats: "f16,q4_0,q4_k",
    shape: "down_proj",
    llamacppTokens: 4,
    llamacppKinds: ["f16"] as QuantKind[],
    llamacppThreads: [1],
    split: { steps: 1, rounds: 1 },
    stepSplit: { batch: [1], steps: 1, rounds: 1, line: "off" as const },
  },
};

export const USAGE =
  `usage: deno task bench speed [--quick] [--tokens N] [--rounds N] [--quant KINDS]
                             [--formats LIST] [--shape NAME] [--llamacpp on|off]
                             [--llamacpp-tokens N] [--decode-steps N]

Issue 22's "Must show" scorecard in one run on this machine: each section as its own bench prints
it — bench decode (batch 1, 4, 16, multi-step against one step per submission, the timestamp step
split, dispatches per step), bench decode --quant (Q4_0 and Q4_K_M against f16 at batch 1 and 16,
with the float kernels and, where WGSL has packed_4x8_integer_dot_product, the integer-dot ones), bench
step-split (the removal split), bench kernels --only matvec (each matvec against the storage and
texture read rooflines) and bench llamacpp (batch-1 decode against llama.cpp's CPU path on the same
GGUF files) — then a goals table: each figure, its goal, met / not met / not measured. About 15
minutes on a quiet 2-core machine; llama.cpp that cannot run is a "not measured" row.

  --quick             a smoke run: few tokens, one round, one matvec shape and format, one
                      llama.cpp kind and thread count (its figures mean little)
  --tokens N          decode steps per measurement, decode and --quant (default 24; quick 4)
  --rounds N          rounds of --quant and of llama.cpp (default 3; quick 1)
  --quant KINDS       kinds against f16, comma-separated: ${
    QUANT_KINDS.join(", ")
  } (default q4_0,q4_k_m)
  --formats LIST      matvec formats (default f16,q8_0,q4_0,q4_k; quick f16,q4_0,q4_k); all: every format
  --shape NAME        only matvec shapes whose name starts with NAME (default all; quick down_proj)
  --llamacpp on|off   run the llama.cpp comparison (default on)
  --llamacpp-tokens N decode steps per llama.cpp measurement (default 64; quick 4)
  --decode-steps N    most decode steps per submission of the multi-step runs (default ${DEFAULT_DECODE_STEPS})`;

export async function benchSpeed(args: string[]): Promise<string> {
  const quick = args.includes("--quick");
  const flags = parseBenchFlags(Flags, args.filter((a) => a !== "--quick"));
  const mode = quick ? MODES.quick : MODES.full;
  const tokens = flags.tokens ?? mode.tokens;
  const rounds = flags.rounds ?? mode.rounds;
  const started = performance.now();
  const load = Deno.loadavg().map((v) => v.toFixed(2)).join(", ");
  const sections: string[] = [];
  const step = async <T>(name: string, measure: () => Promise<T>, format: (r: T) => string) => {
    const t0 = performance.now();
    console.error(`speed: ${name} ...`);
    const result = await measure();
    sections.push(format(result));
    console.error(`speed: ${name} done in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    return result;
  };

  const decode = await step(
    "decode",
    () =>
      measureDecodeBench({
        tokens,
        decodeSteps: flags["decode-steps"],
        groupMs: DEFAULT_GROUP_MS,
        matmulKernel: "auto",
        split: mode.split,
      }),
    formatDecode,
  );
  const quant = await step(
    "decode --quant",
    () => measureDecodeQuant(flags.quant ?? mode.quant, tokens, rounds, true),
    formatDecodeQuant,
  );
  const stepSplit = await step(
    "step split",
    () => measureStepSplit({ ...STEP_SPLIT_DEFAULTS, ...mode.stepSplit }),
    formatStepSplit,
  );
  const formats = flags.formats ?? mode.formats;
  const matvec = await step(
    "matvec",
    async () =>
      matvecMeasurement(await openGpu(), {
        shape: flags.shape ?? mode.shape,
        formats: formats === "all" ? undefined : formats.split(",").map((f) => f.trim()),
      }),
    (r) => [`## Matrix-vector kernels — ${r.adapter}`, "", ...matvecTable(r)].join("\n"),
  );
  let llamacpp: SpeedResults["llamacpp"];
  if (flags.llamacpp === "off") {
    llamacpp = { notRun: "skipped (--llamacpp off)" };
  } else {
    try {
      llamacpp = await step("llama.cpp", () =>
        measureLlamaCpp({
          ...LLAMACPP_DEFAULTS,
          tokens: flags["llamacpp-tokens"] ?? mode.llamacppTokens,
          rounds,
          kinds: mode.llamacppKinds,
          threads: mode.llamacppThreads,
          // Prefill is not on the scorecard.
          prompt: 0,
        }), formatReport);
    } catch (e) {
      const why = `llama.cpp could not run: ${(e as Error).message.replace(/\s*\n\s*/g, " ")}`;
      console.error(`speed: ${why}`);
      sections.push(`### Sluice against llama.cpp's CPU path\n\nNot measured: ${why}.`);
      llamacpp = { notRun: why } satisfies NotRun;
    }
  }

  const results: SpeedResults = { decode, quant, stepSplit, matvec, llamacpp };
  return [
    `# Speed scorecard (issue 22) — ${decode.adapter}${quick ? ", --quick (a smoke run)" : ""}`,
    "",
    `One process, one sitting; sections in the order run. Load average at start: ${load}; ` +
    `${((performance.now() - started) / 60_000).toFixed(1)} minutes in all.`,
    "",
    ...sections.flatMap((s) => [s, ""]),
    '## Goals (issue 22, "Must show")',
    "",
    ...goalsTable(scorecardFigures(results)),
  ].join("\n");
}
