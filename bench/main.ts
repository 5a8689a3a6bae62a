// `deno task bench NAME [flags]` (kernels, decode, step-split, llamacpp, speed, kv, serve, matrix,
// constrained, capacity, embeddings, plan, responsiveness, head-of-line, greedy-rate, huge-prompts,
// connection-flood, startup, gpu, model-switch, speculative, model-shape): runs one benchmark,
// prints its Markdown report and saves it under bench/reports/. `--help` prints a bench's usage and
// runs nothing; a bad flag prints one line and
// the usage (exit 2) before any work starts.

import { UsageError } from "./common/cli.ts";
import { ensureRuntimeDir } from "../engine/bench_api.ts";

interface Bench {
  /** One line for the list of benches. */
  summary: string;
  /** The bench's module: its USAGE, and the run. */
  load: () => Promise<{ usage: string; run: (args: string[]) => Promise<string> }>;
}

const BENCHES: Record<string, Bench> = {
  kernels: {
    summary: "copy bandwidth and the matmul on SmolLM2-135M's shapes",
    load: async () => {
      const { USAGE, benchKernels } = await import("./kernels.ts");
      const { parseBenchFlags } = await import("./common/cli.ts");
      const { z } = await import("zod");
      return {
        usage: USAGE,
        run: async (args) => {
          const flags = parseBenchFlags(
            z.object({
              only: z.enum(["all", "matvec"]).default("all"),
              shape: z.string().optional(),
              formats: z.string().optional(),
            }),
            args,
          );
          const { openGpu } = await import("../engine/engine.ts");
          return benchKernels(await openGpu(), {
            only: flags.only,
            shape: flags.shape,
            formats: flags.formats?.split(","),
          });
        },
      };
    },
  },
  decode: {
    summary: "whole-engine decode and prefill tokens/s",
    load: async () => {
      const m = await import("./decode.ts");
      return { usage: m.USAGE, run: m.benchDecode };
    },
  },
  "step-split": {
    summary: "where a decode step's time goes: weights, attention, norms, LM head, sampler, fixed",
    load: async () => {
      const m = await import("./step_split.ts");
      return { usage: m.USAGE, run: m.benchStepSplit };
    },
  },
  llamacpp: {
    summary: "decode tokens/s at batch 1 against llama.cpp's CPU path on the same GGUF files",
    load: async () => {
      const m = await import("./llamacpp.ts");
      return { usage: m.USAGE, run: m.benchLlamaCpp };
    },
  },
  speed: {
    summary:
      "issue 22's scorecard in one run: decode, quant, step split, matvecs, llama.cpp, goals",
    load: async () => {
      const m = await import("./speed.ts");
      return { usage: m.USAGE, run: m.benchSpeed };
    },
  },
  "model-shape": {
    summary:
      "Phi-4-mini, SmolLM3, Gemma 3 270M widths (random) as Q4_K_M GGUF: one chat, tokens/s, RSS",
    load: async () => {
      const m = await import("./model_shape.ts");
      return { usage: m.USAGE, run: m.benchModelShape };
    },
  },
  kv: {
    summary: "KV swap costs, block groups, the profiled cost model",
    load: async () => {
      const m = await import("./kv.ts");
      return { usage: m.USAGE, run: m.benchKv };
    },
  },
  serve: {
    summary: "a seeded workload replayed against real servers (or --clients N concurrency)",
    load: async () => {
      const m = await import("./serve.ts");
      return {
        usage: m.USAGE,
        // `--clients 1,4,16` measures concurrency scaling; otherwise the workload replayer runs.
        run: async (args) =>
          args.some((a) => a.startsWith("--clients"))
            ? (await import("./serve/concurrency.ts")).benchConcurrency(args)
            : m.benchServe(args),
      };
    },
  },
  matrix: {
    summary: "issue 19's workload matrix: each cell against fcfs as vLLM V1 runs it, with goals",
    load: async () => {
      const m = await import("./matrix.ts");
      return { usage: m.USAGE, run: m.benchMatrix };
    },
  },
  constrained: {
    summary: "constrained decoding: its cost to unconstrained streams, and grammar compile times",
    load: async () => {
      const m = await import("./constrained.ts");
      return { usage: m.USAGE, run: m.benchConstrained };
    },
  },
  speculative: {
    summary: "speculative decoding: tokens/s against none at controlled acceptance rates",
    load: async () => {
      const m = await import("./speculative.ts");
      return { usage: m.USAGE, run: m.benchSpeculative };
    },
  },
  capacity: {
    summary: "the highest arrival rate with >= 90% SLO goodput, per configuration",
    load: async () => {
      const m = await import("./capacity.ts");
      return { usage: m.USAGE, run: m.benchCapacity };
    },
  },
  embeddings: {
    summary: "encoder embeddings: inputs/s and tokens/s at batch 1 and 32 (all-MiniLM shape)",
    load: async () => {
      const m = await import("./embeddings.ts");
      return { usage: m.USAGE, run: m.benchEmbeddings };
    },
  },
  plan: {
    summary: "OrbitFlow offload planner: solve time against one decode step",
    load: async () => {
      const m = await import("./plan.ts");
      return { usage: m.USAGE, run: m.benchPlan };
    },
  },
  responsiveness: {
    summary: "/health and stream gaps during a long prefill; paced cadence",
    load: async () => {
      const m = await import("./responsiveness.ts");
      return { usage: m.USAGE, run: m.benchResponsiveness };
    },
  },
  "head-of-line": {
    summary: "a short stream's first token while a long prompt prefills, against idle",
    load: async () => {
      const m = await import("./head_of_line.ts");
      return { usage: m.USAGE, run: m.benchHeadOfLine };
    },
  },
  "connection-flood": {
    summary: "idle-connection floods at given descriptor limits: admitted, refused, recovery",
    load: async () => {
      const m = await import("./reliability/connection_flood.ts");
      return { usage: m.USAGE, run: m.benchConnectionFlood };
    },
  },
  "huge-prompts": {
    summary: "/health latency and RSS while eight near-limit prompts arrive at once",
    load: async () => {
      const m = await import("./reliability/huge_prompts.ts");
      return { usage: m.USAGE, run: m.benchHugePrompts };
    },
  },
  "greedy-rate": {
    summary: "short requests beside a stream at a huge reading_rate, against an unpaced one",
    load: async () => {
      const m = await import("./reliability/greedy_rate.ts");
      return { usage: m.USAGE, run: m.benchGreedyRate };
    },
  },
  startup: {
    summary: "time from process start to /health ready, cold and warm shader cache",
    load: async () => {
      const m = await import("./startup.ts");
      return { usage: m.USAGE, run: m.benchStartup };
    },
  },
  gpu: {
    summary: "the one report for a lent GPU: adapter, matvec GB/s, decode by kind and batch, serve",
    load: async () => {
      const m = await import("./gpu.ts");
      return { usage: m.USAGE, run: m.benchGpu };
    },
  },
  "embeddings-llamacpp": {
    summary: "encoder vectors against llama.cpp's on the same generated GGUF files (cosine)",
    load: async () => {
      const m = await import("./embeddings_llamacpp.ts");
      return { usage: m.USAGE, run: m.benchEmbeddingsLlamaCpp };
    },
  },
  "model-switch": {
    summary: "time to first token when a request switches models (--max-loaded 1), cold and warm",
    load: async () => {
      const m = await import("./model_switch.ts");
      return { usage: m.USAGE, run: m.benchModelSwitch };
    },
  },
};

export const USAGE = `usage: deno task bench <bench> [flags]    (bench/main.ts)

benches:
${Object.entries(BENCHES).map(([name, b]) => `  ${name.padEnd(19)} ${b.summary}`).join("\n")}

"<bench> --help" lists a bench's flags. Reports are printed and saved as bench/reports/<bench>.md.`;

/** Runs `bench [flags]`; returns the exit status. */
export async function runBench(args: string[]): Promise<number> {
  const [which, ...rest] = args;
  const bench = which === undefined ? undefined : BENCHES[which];
  if (!bench) {
    const help = which === undefined || which === "--help" || which === "-h";
    if (help) console.log(USAGE);
    else console.error(`bench: unknown bench "${which}"\n\n${USAGE}`);
    return help ? 0 : 2;
  }
  const { usage, run } = await bench.load();
  if (rest.some((a) => a === "--help" || a === "-h")) {
    console.log(usage);
    return 0;
  }
  ensureRuntimeDir();
  let report: string;
  try {
    report = await run(rest);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    // One line: node's parseArgs explains some errors over several.
    console.error(`bench ${which}: ${e.message.replace(/\s*\n\s*/g, " ")}\n\n${usage}`);
    return 2;
  }
  console.log(report);
  await Deno.mkdir("bench/reports", { recursive: true });
  await Deno.writeTextFile(`bench/reports/${which}.md`, report + "\n");
  return 0;
}

if (import.meta.main) Deno.exit(await runBench(Deno.args));
