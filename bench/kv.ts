// `deno task bench kv`: what moving KV between the device and the host costs here, and whether
// block groups (FastSwitch) pay. A whole 1024-token request of the SmolLM2-135M-shaped model
// (30 layers) is swapped out and back with block groups and with one copy per block, for three
// block layouts; then the cost model the load profiled, and whether a copy overlaps a step's
// kernels (FastSwitch assumes a swap stream overlapping inference; WebGPU has one queue).
// The engine merges a copy's blocks into runs wherever device and host blocks are both
// consecutive, so the per-block baseline numbers its host blocks two apart: no two make a run.

import { z } from "zod";
import { type CostModel, Engine, type Gpu, type KvCopy, openGpu } from "../engine/engine.ts";
import { copyMs, demoModelDir, gbPerS } from "../engine/bench_api.ts";
import { BlockPool } from "../runtime/bench_api.ts";
import { engineOverlap, type OverlapMeasurement } from "./kv_overlap.ts";
import { smolShapedModelDir } from "./decode.ts";
import { parseBenchFlags } from "./common/cli.ts";
import { benchPrefixTtft, benchSwapReuse } from "./kv_runtime.ts";
import { benchOffloadDistance } from "./kv_distance.ts";
import { benchKvDtype } from "./kv_dtype.ts";

const TOKENS = 1024;

const Flags = z.object({
  tokens: z.coerce.number().int().min(16).max(1_000_000).default(TOKENS),
  only: z.enum(["runtime", "distance", "dtype"]).optional(),
  // --only dtype: the quantized KV dtype against f16, on this model (default: the SmolLM2 shape).
  "kv-dtype": z.enum(["q8_0", "f32"]).default("q8_0"),
  model: z.string().min(1).optional(),
  "gpu-kv-mb": z.coerce.number().positive().default(96),
  steps: z.coerce.number().int().min(1).max(4096).default(32),
});

export const USAGE = `usage: deno task bench kv [--tokens N] [--only runtime|distance|dtype]

What moving KV between the device and the host costs: a request of N tokens of the SmolLM2-135M-shaped
model swapped out and back with block groups and per block, the cost model profiled at load, and
whether a copy overlaps a step's kernels.

  --tokens N      the swapped request's length (default ${TOKENS})
  --only runtime  only the runtime-level part (swap reuse, prefix cache)
  --only distance only decode step time vs offload distance, against the cost model
  --only dtype    only a quantized KV cache against f16 KV: greedy agreement and |Δ logprob|
                  over a few prose prompts (teacher-forced), and the tokens and requests of
                  --tokens N one --gpu-kv-mb holds; with
    --kv-dtype q8_0|f32  the dtype compared with f16 (default q8_0)
    --model DIR          a model directory or .gguf file (default: the SmolLM2-135M-shaped
                         model, whose random weights make its accuracy figures a smoke test only)
    --gpu-kv-mb MB       the device budget both caches get (default 96)
    --steps N            greedy steps per prompt (default 32)`;
const REPS = 5;
const OVERLAP_REPS = 9;

interface Layout {
  name: string;
  copies: (direction: "out" | "in") => KvCopy[];
}

interface SwapResult {
  layout: string;
  grouped: boolean;
  bytes: number;
  outMs: number;
  inMs: number;
  outCopies: number;
  inCopies: number;
}

export async function benchKv(args: string[]): Promise<string> {
  const flags = parseBenchFlags(Flags, args);
  const tokens = flags.tokens;
  const gpu = await openGpu();
  // The runtime-level part alone (swap reuse, prefix cache): `bench kv --only=runtime`.
  const runtimePart = async () => [await benchSwapReuse(gpu), await benchPrefixTtft(gpu)];
  if (flags.only === "runtime") return (await runtimePart()).join("\n\n");
  if (flags.only === "distance") return await benchOffloadDistance(gpu);
  if (flags.only === "dtype") {
    return await benchKvDtype({
      gpu,
      modelDir: flags.model ?? await smolShapedModelDir(),
      candidate: flags["kv-dtype"],
      gpuKvMb: flags["gpu-kv-mb"],
      steps: flags.steps,
      requestTokens: tokens,
    });
  }
  const dir = await smolShapedModelDir();
  // Host room for the per-block baseline's numbering, which spans twice the blocks.
  const options = { modelDir: dir, gpu, gpuKvMb: 96, hostKvMb: 96, maxSlots: 4, maxRows: 64 };

  const results: SwapResult[] = [];
  let smolModel: CostModel | undefined;
  let info: Engine["info"] | undefined;
  for (const grouped of [true, false]) {
    // The block-group engine also warms up and profiles: its cost model is reported below.
    const engine = await Engine.load({ ...options, skipWarmUp: !grouped });
    try {
      smolModel ??= engine.info.costModel;
      info = engine.info;
      for (const layout of layouts(engine, tokens)) {
        results.push(await swaps(engine, layout, grouped));
      }
    } finally {
      await engine.close();
    }
  }
  const demo = await Engine.load({
    modelDir: await demoModelDir(),
    gpu,
    gpuKvMb: 64,
    profileCosts: true,
  });
  let overlaps: OverlapMeasurement[];
  try {
    overlaps = await measureOverlaps(demo);
  } finally {
    await demo.close();
  }
  return [
    report(gpu, info!, tokens, results, smolModel!, demo.info.costModel!, overlaps),
    await benchOffloadDistance(gpu),
    ...await runtimePart(),
  ].join("\n\n");
}

/**
 * One request of `tokens` tokens, in three layouts: a fresh pool (every layer one run, layers
 * side by side); a prefill in 128-token chunks interleaved with another request's, host blocks
 * assigned layer by layer; the same, host blocks assigned in device-block order.
 */
function layouts(engine: Engine, tokens: number): Layout[] {
  const { numLayers } = engine.info;
  const fresh = new BlockPool(engine.info);
  fresh.growAll("a", tokens);
  const mixed = new BlockPool(engine.info);
  for (let t = 128; t <= tokens; t += 128) {
    mixed.growAll("a", t);
    mixed.growAll("b", t);
  }
  const layers = Array.from({ length: numLayers }, (_, l) => l);
  const byLayer = (pool: BlockPool) => (direction: "out" | "in") => {
    let next = 0;
    return layers.map((layer) => {
      const deviceBlocks = pool.table("a", layer);
      return { direction, layer, deviceBlocks, hostBlocks: deviceBlocks.map(() => next++) };
    });
  };
  const byDevice = (direction: "out" | "in") => {
    const order = layers.flatMap((l) => mixed.table("a", l)).sort((x, y) => x - y);
    const host = new Map(order.map((d, i) => [d, i]));
    return layers.map((layer) => {
      const deviceBlocks = mixed.table("a", layer);
      return { direction, layer, deviceBlocks, hostBlocks: deviceBlocks.map((d) => host.get(d)!) };
    });
  };
  return [
    { name: "fresh pool", copies: byLayer(fresh) },
    { name: "interleaved, host by layer", copies: byLayer(mixed) },
    { name: "interleaved, host in device order", copies: byDevice },
  ];
}

/**
 * Swaps the layout's request out and back REPS times; median times, copies per swap. Not
 * `grouped`: the layout's host blocks doubled, so that every block is a copy of its own.
 */
async function swaps(engine: Engine, layout: Layout, grouped: boolean): Promise<SwapResult> {
  const step = { tables: [], sampling: [], rows: [], samples: [], wantTopLogprobs: false };
  const copies = (direction: "out" | "in") =>
    layout.copies(direction).map((c) =>
      grouped ? c : { ...c, hostBlocks: c.hostBlocks.map((h) => 2 * h) }
    );
  const outMs: number[] = [], inMs: number[] = [];
  const s0 = engine.copyStats();
  for (let r = 0; r < REPS; r++) {
    let t0 = performance.now();
    await engine.step({ ...step, copies: copies("out") });
    outMs.push(performance.now() - t0);
    t0 = performance.now();
    await engine.step({ ...step, copies: copies("in") });
    engine.gpu.device.queue.submit([]);
    await engine.gpu.device.queue.onSubmittedWorkDone();
    inMs.push(performance.now() - t0);
  }
  const s1 = engine.copyStats();
  return {
    layout: layout.name,
    grouped,
    bytes: (s1.out.bytes - s0.out.bytes) / REPS,
    outMs: median(outMs),
    inMs: median(inMs),
    outCopies: (s1.out.copies - s0.out.copies) / REPS,
    inCopies: (s1.in.copies - s0.in.copies) / REPS,
  };
}

/** On the demo model, whose steps are short enough to pair with a copy of similar length. */
async function measureOverlaps(engine: Engine): Promise<OverlapMeasurement[]> {
  const out = [];
  for (const [rows, mib] of [[1, 16], [8, 64], [32, 256]]) {
    out.push(await engineOverlap(engine, { rows, bytes: mib << 20, reps: OVERLAP_REPS }));
  }
  return out;
}

function report(
  gpu: Gpu,
  info: Engine["info"],
  tokens: number,
  results: SwapResult[],
  smol: CostModel,
  demo: CostModel,
  overlaps: OverlapMeasurement[],
): string {
  const rt = smol.roundTripMs;
  const gb = (bytes: number, ms: number) =>
    `${(bytes / ms / 1e6).toFixed(2)} (${(bytes / Math.max(ms - rt, 1e-3) / 1e6).toFixed(2)})`;
  const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
  const swapRows = results.map((r) => {
    const base = results.find((b) => b.layout === r.layout && !b.grouped)!;
    const fewer = r.grouped ? ` (${(base.outCopies / r.outCopies).toFixed(0)}× fewer)` : "";
    const outModel = copyMs(smol, { rows: 0, bytesOut: r.bytes, copiesOut: r.outCopies }) + rt;
    const inModel = copyMs(smol, { rows: 0, bytesIn: r.bytes, copiesIn: r.inCopies }) + rt;
    return [
      r.layout,
      r.grouped ? "block groups" : "one per block",
      `${r.outCopies}${fewer}`,
      (r.bytes / r.outCopies / 1024).toFixed(1),
      `${r.outMs.toFixed(1)} (${outModel.toFixed(1)})`,
      gb(r.bytes, r.outMs),
      `${r.inMs.toFixed(1)} (${inModel.toFixed(1)})`,
      gb(r.bytes, r.inMs),
    ].join(" | ").replace(/^/, "| ").concat(" |");
  });
  const line = (l: { fixedMs: number; perUnitMs: number }, unit: string) =>
    `${l.fixedMs.toFixed(3)} ms + ${l.perUnitMs.toFixed(3)} ms/${unit}`;
  const copyLine = (l: { fixedMs: number; perUnitMs: number }) =>
    `${l.fixedMs.toFixed(3)} ms + bytes at ${gbPerS(l).toFixed(2)} GB/s`;
  const model = (name: string, f: (m: CostModel) => string) =>
    `| ${name} | ${f(smol)} | ${f(demo)} |`;
  const overlapRows = overlaps.map((o) =>
    `| ${o.rows} | ${mb(o.bytes)} MiB | ${o.computeMs.toFixed(1)} | ${o.copyMs.toFixed(1)} | ${
      o.oneSubmissionMs.toFixed(1)
    } (${o.oneSubmissionRatio.toFixed(2)}) | ${o.twoSubmissionsMs.toFixed(1)} (${
      o.twoSubmissionsRatio.toFixed(2)
    }) | ${(Math.max(o.computeMs, o.copyMs) / (o.computeMs + o.copyMs)).toFixed(2)} | ${
      o.overlap.toFixed(2)
    } |`
  );
  return [
    `### KV swap benchmark (${gpu.adapterName}, ${info.dtype}, SmolLM2-135M shape)`,
    "",
    `One request of ${tokens} tokens × ${info.numLayers} layers: ${
      mb(results[0].bytes)
    } MiB of K and V in ${(tokens / info.blockSize) * info.numLayers} blocks of ${
      info.kvBlockBytes / 1024
    } KiB. Swap-out: a copy-only step until its records (the bytes are in host memory); ` +
    `swap-in: a copy-only step, then a wait for the queue. Medians of ${REPS}. Times include ` +
    `one round trip (${rt.toFixed(1)} ms); in brackets after a time, the cost model's ` +
    `prediction, and after GB/s, GB/s with the round trip taken off.`,
    "",
    "| layout | copies | per swap-out | KiB per copy | swap-out ms | GB/s | swap-in ms | GB/s |",
    "|---|---|---|---|---|---|---|---|",
    ...swapRows,
    "",
    "#### Cost model fitted at load",
    "",
    "| | SmolLM2 shape | demo model |",
    "|---|---|---|",
    model("round trip", (m) => `${m.roundTripMs.toFixed(1)} ms`),
    model("one layer, n rows", (m) => line(m.layer, "row")),
    model("LM head + sampler, s rows", (m) => line(m.sample, "row")),
    model("host → device copy", (m) => copyLine(m.hostToDevice)),
    model("device → host copy", (m) => copyLine(m.deviceToHost)),
    model("prefetch between layers", (m) => m.prefetch ? copyLine(m.prefetch) : "—"),
    "",
    "#### Do copies overlap compute? (demo model; device-to-device copy)",
    "",
    `Queue times in ms, medians of ${OVERLAP_REPS} repetitions of all four back to back, round ` +
    "trip subtracted. In brackets, the median within-repetition ratio of together to step + " +
    "copy apart: 1.00 is serial; the ratio a full overlap would give is in its own column. " +
    "overlap: median share of the shorter one hidden (one submission).",
    "",
    "| rows | copy | step alone | copy alone | one submission | two submissions | full overlap | " +
    "overlap |",
    "|---|---|---|---|---|---|---|---|",
    ...overlapRows,
  ].join("\n");
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}
