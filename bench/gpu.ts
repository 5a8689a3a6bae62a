// `deno task bench gpu`: the one command to run when a machine with a real GPU is lent, writing one
// Markdown report: the adapter (its features, WGSL language features and limits, and the memory
// bandwidth of the GPU it names, from its datasheet), every matvec's GB/s against that bandwidth,
// decode tokens/s at batch 1, 4 and 16 for f16, Q8_0, Q4_0 and Q4_K_M files of one generated model
// with multi-step decode on and off, and `bench serve` at one budget. Models are generated where it
// runs (nothing downloads); --short runs the same sections on a small shape in about a minute here
// (tests/bench/gpu_test.ts runs it). Speculative decoding (k = 4) at p = 0 and 0.8 against none
// at batch 1 and 4 (short: batch 1) is bench speculative's table on the same model. Sections that
// Sluice does not have yet (integer-dot kernels: issue 33) are rows that say so, not numbers.

import { z } from "zod";
import { Engine, openGpu, type StepEngine } from "../engine/engine.ts";
import { DEFAULT_DECODE_STEPS } from "../runtime/bench_api.ts";
import { Runtime } from "../runtime/service.ts";
import { parseBenchFlags } from "./common/cli.ts";
import { type BenchShape, shapedModelDir } from "./common/smol_model.ts";
import { measureDecode } from "./decode_measure.ts";
import { type QuantKind, shapedGguf } from "./gguf_models.ts";
import { matvecMeasurement, type MatvecResult } from "./kernels.ts";

const KINDS: QuantKind[] = ["f16", "q8_0", "q4_0", "q4_k_m"];
const BATCHES = [1, 4, 16] as const;

const Flags = z.object({
  kinds: z.string().optional().transform((s, ctx) => {
    if (s === undefined) return KINDS;
    const list = s.split(",").map((k) => k.trim()) as QuantKind[];
    const bad = list.find((k) => !KINDS.includes(k));
    if (bad || list.length === 0) {
      ctx.addIssue({ code: "custom", message: `expected a list of ${KINDS.join(", ")}` });
      return z.NEVER;
    }
    return list;
  }),
  tokens: z.coerce.number().int().min(1).max(10_000).optional(),
  serve: z.enum(["on", "off"]).optional(),
  speculative: z.enum(["on", "off"]).default("on"),
});

export const USAGE =
  `usage: deno task bench gpu [--short] [--kinds LIST] [--tokens N] [--serve on|off]

One report for a GPU machine: adapter and features, matvec GB/s against the GPU's memory bandwidth,
decode tokens/s at batch 1, 4, 16 for f16, Q8_0, Q4_0, Q4_K_M (multi-step on and off), and bench
serve at one budget, on a SmolLM2-135M-shaped random model.

  --short        a small shape, one matvec, few tokens, no serve: every section in under a
                 minute here (tests/bench/gpu_test.ts)
  --kinds LIST   model files to decode (default f16,q8_0,q4_0,q4_k_m)
  --tokens N     decode steps measured per cell (default 64; short: 4)
  --serve on|off run bench serve at one budget (default on; short: off)
  --speculative on|off  speculative decoding at p = 0 and 0.8 against none (default on)`;

/** Peak memory bandwidth of GPUs an adapter may name, GB/s, from each vendor's datasheet. */
const BANDWIDTH_GBS: [RegExp, number, string][] = [
  // NVIDIA H200 datasheet: 4.8 TB/s HBM3e.
  [/H200/i, 4800, "H200 (HBM3e)"],
  // NVIDIA H100 datasheet: PCIe 2.0 TB/s (HBM2e), SXM5 3.35 TB/s (HBM3).
  [/H100.*PCIe/i, 2000, "H100 PCIe"],
  [/H100/i, 3350, "H100 SXM5"],
  // NVIDIA A100 datasheet: 80 GB SXM 2,039 GB/s; 40 GB 1,555 GB/s.
  [/A100.*80/i, 2039, "A100 80GB"],
  [/A100/i, 1555, "A100 40GB"],
  // NVIDIA L40S 864 GB/s, L4 300 GB/s, A10 600 GB/s, RTX 4090 1,008 GB/s, V100 900 GB/s.
  [/L40S/i, 864, "L40S"],
  [/\bL4\b/i, 300, "L4"],
  [/\bA10\b/i, 600, "A10"],
  [/4090/i, 1008, "RTX 4090"],
  [/V100/i, 900, "V100"],
];

export function knownBandwidth(adapter: string): { gbs: number; name: string } | null {
  const hit = BANDWIDTH_GBS.find(([re]) => re.test(adapter));
  return hit ? { gbs: hit[1], name: hit[2] } : null;
}

interface DecodeCell {
  kind: QuantKind;
  batch: number;
  single: number;
  multi: number;
}

export interface GpuBenchResult {
  adapter: string;
  adapterId: string;
  features: string[];
  wgsl: string[];
  limits: Record<string, number>;
  shape: BenchShape;
  matvec: MatvecResult;
  decode: DecodeCell[];
  weightBytes: Record<string, number>;
  serve: string | null;
  /** bench speculative's table on the same model; null with --speculative off. */
  speculative: string | null;
  seconds: number;
}

export async function benchGpu(args: string[]): Promise<string> {
  // Bench flags all take values; --short is a switch, taken out first (as bench speed's --quick).
  const short = args.includes("--short");
  const f = parseBenchFlags(Flags, args.filter((a) => a !== "--short"));
  return formatGpu(await measureGpu({ ...f, short }));
}

export async function measureGpu(
  f: z.infer<typeof Flags> & { short: boolean },
): Promise<GpuBenchResult> {
  const t0 = performance.now();
  const shape: BenchShape = f.short ? "short" : "smol";
  const tokens = f.tokens ?? (f.short ? 4 : 64);
  const gpu = await openGpu();
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  const features = [...adapter?.features ?? []].map(String).sort();
  // Deno has WGSL language features (packed_4x8_integer_dot_product …); its types do not yet.
  const languageFeatures = (navigator.gpu as { wgslLanguageFeatures?: Iterable<string> })
    .wgslLanguageFeatures;
  const wgsl = [...(languageFeatures ?? [])].map(String).sort();
  const lim = adapter?.limits;
  const limits: Record<string, number> = {};
  for (
    const name of [
      "maxStorageBufferBindingSize",
      "maxBufferSize",
      "maxComputeWorkgroupStorageSize",
      "maxComputeInvocationsPerWorkgroup",
    ] as const
  ) if (lim) limits[name] = lim[name];
  console.error(`bench gpu: ${gpu.adapterName}; matvecs ...`);
  const matvecStart = performance.now();
  const matvec = await matvecMeasurement(gpu, {
    formats: f.short
      ? [gpu.f16 ? "f16" : "f32"]
      : [gpu.f16 ? "f16" : "f32", "q8_0", "q4_0", "q4_k"],
    shape: f.short ? "o_proj" : undefined,
    rounds: f.short ? 1 : undefined,
  });
  console.error(`matvecs in ${((performance.now() - matvecStart) / 1000).toFixed(1)} s`);
  const decode: DecodeCell[] = [];
  const weightBytes: Record<string, number> = {};
  for (const kind of f.kinds) {
    const started = performance.now();
    const path = await shapedGguf(kind, shape);
    const engine = await Engine.load({
      modelDir: path,
      gpu,
      maxSlots: 16,
      maxRows: 256,
      gpuKvMb: 64,
      maxDecodeSteps: DEFAULT_DECODE_STEPS,
      skipWarmUp: f.short,
    });
    weightBytes[kind] = engine.info.weightBytes;
    console.error(`${kind}: loaded in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    for (const batch of BATCHES) {
      const single = await decodeRate(engine, batch, tokens, 1);
      const multi = await decodeRate(engine, batch, tokens, DEFAULT_DECODE_STEPS);
      decode.push({ kind, batch, single, multi });
      console.error(`${kind} batch ${batch}: ${single.toFixed(1)} / ${multi.toFixed(1)} tok/s`);
    }
    await engine.close();
  }
  let speculative: string | null = null;
  if (f.speculative === "on") {
    console.error("speculative decoding ...");
    const { speculativeReport } = await import("./speculative.ts");
    speculative = await speculativeReport(
      {
        tokens: f.short ? 16 : 48,
        k: 4,
        batches: f.short ? [1] : [1, 4],
        acceptance: [0, 0.8],
        rounds: f.short ? 1 : 3,
      },
      await shapedModelDir(shape),
      shape === "smol" ? "SmolLM2-135M shape" : "short shape",
    );
  }
  let serve: string | null = null;
  if ((f.serve ?? (f.short ? "off" : "on")) === "on") {
    const { benchServe } = await import("./serve.ts");
    serve = await benchServe(["--configs", "default", "--model", await shapedModelDir(shape)]);
  }
  return {
    adapter: gpu.adapterName,
    adapterId: gpu.adapterId ?? gpu.adapterName,
    features,
    wgsl,
    limits,
    shape,
    matvec,
    decode,
    weightBytes,
    serve,
    speculative,
    seconds: (performance.now() - t0) / 1000,
  };
}

/** Decode tokens/s of `batch` requests over a fresh runtime on `engine`, `steps` per submission. */
async function decodeRate(engine: Engine, batch: number, tokens: number, steps: number) {
  const shared: StepEngine = {
    info: engine.info,
    step: (plan) => engine.step(plan),
    close: () => Promise.resolve(),
  };
  const runtime = new Runtime(shared, {
    policy: "fcfs",
    maxQueue: 64,
    maxTokensLimit: 100_000,
    eosIds: [],
    decodeSteps: steps,
  });
  try {
    return (await measureDecode(runtime, engine.info.vocabSize, batch, tokens)).tokensPerS;
  } finally {
    await runtime.close();
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
};

export function formatGpu(r: GpuBenchResult): string {
  const peak = knownBandwidth(r.adapter);
  const lines = [
    `# GPU bench: ${r.adapter}`,
    "",
    `${r.adapterId}. ${
      r.shape === "smol" ? "SmolLM2-135M-shaped" : "Short (2-layer, hidden 256)"
    } random model; one run, ${r.seconds.toFixed(0)} s in all.`,
    "",
    "## Adapter",
    "",
    `- features: ${r.features.join(", ") || "none"}`,
    `- WGSL language features: ${r.wgsl.join(", ") || "none"}`,
    `- limits: ${Object.entries(r.limits).map(([k, v]) => `${k} ${v}`).join(", ")}`,
    `- memory bandwidth: ${
      peak ? `${peak.gbs} GB/s (${peak.name}, datasheet)` : "unknown for this adapter"
    }`,
    "",
    "## Matvec GB/s (one row; weights in storage and in a texture)",
    "",
    `| shape | format | storage GB/s | texture GB/s |${peak ? " best ÷ peak |" : ""}`,
    `| --- | --- | --- | --- |${peak ? " --- |" : ""}`,
  ];
  for (const row of r.matvec.rows) {
    row.cells.forEach((cell, i) => {
      if (!cell) return;
      const s = median(cell.storageKernel), t = median(cell.textureKernel);
      lines.push(
        `| ${row.shape} ${row.dims} | ${r.matvec.formats[i]} | ${s.toFixed(1)} | ${
          t.toFixed(1)
        } |` +
          (peak ? ` ${(100 * Math.max(s, t) / peak.gbs).toFixed(1)}% |` : ""),
      );
    });
  }
  lines.push(
    "",
    "## Decode tokens/s (one step per submission / multi-step)",
    "",
    `| kind | weights MiB | ${BATCHES.map((b) => `batch ${b}`).join(" | ")} | batch 1 ÷ f16 |`,
    `| --- | --- | ${BATCHES.map(() => "---").join(" | ")} | --- |`,
  );
  const f16 = r.decode.find((d) => d.kind === "f16" && d.batch === 1);
  for (const kind of KINDS) {
    if (!(kind in r.weightBytes)) continue;
    const cells = BATCHES.map((b) => r.decode.find((d) => d.kind === kind && d.batch === b)!);
    const one = cells[0];
    lines.push(
      `| ${kind} | ${(r.weightBytes[kind] / 2 ** 20).toFixed(1)} | ${
        cells.map((c) => `${c.single.toFixed(1)} / ${c.multi.toFixed(1)}`).join(" | ")
      } | ${
        f16 ? (Math.max(one.single, one.multi) / Math.max(f16.single, f16.multi)).toFixed(2) : "–"
      }× |`,
    );
  }
  lines.push(
    "",
    "Not measured, because Sluice does not have them yet (issue 33): the integer-dot kernels " +
      "(`dot4I8Packed`) beside the float ones.",
    "",
  );
  if (r.speculative) lines.push("## Speculative decoding (k = 4)", "", r.speculative, "");
  if (r.serve) lines.push("## bench serve (default configuration, one budget)", "", r.serve, "");
  return lines.join("\n");
}
