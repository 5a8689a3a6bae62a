// Speculative decoding's speed (issue 33): tokens/s per stream at batch 1 and 4, speculating with
// k drafts per step, against the same streams without speculation, at controlled acceptance rates.
// A random model accepts almost nothing a real drafter proposes, so the drafter here proposes the
// target's own tokens, recorded in a first run of the same greedy requests, each kept with
// probability p (bench/common/trace_drafter.ts): p = 0, 0.5, 0.8, 1. Every speculating run's tokens
// are checked against the recorded ones (greedy identity). Both sides run the engine's defaults
// otherwise: decode groups of up to 8 steps where nothing needs the host, two steps in flight.

import { z } from "zod";
import { Engine, openGpu, type StepEngine } from "../engine/engine.ts";
import { Runtime, type RuntimeStats } from "../runtime/service.ts";
import { DEFAULT_DECODE_STEPS } from "../runtime/bench_api.ts";
import { parseBenchFlags } from "./common/cli.ts";
import { smolShapedModelDir } from "./common/smol_model.ts";
import { TraceDrafter } from "./common/trace_drafter.ts";
import { GREEDY, prompt } from "./decode_measure.ts";

const list = (s: string) => s.split(",").map(Number);
const Flags = z.object({
  tokens: z.coerce.number().int().min(8).max(10_000).default(48),
  k: z.coerce.number().int().min(1).max(16).default(4),
  batches: z.string().default("1,4").transform(list)
    .pipe(z.array(z.number().int().min(1).max(16))),
  acceptance: z.string().default("0,0.5,0.8,1").transform(list)
    .pipe(z.array(z.number().min(0).max(1))),
  rounds: z.coerce.number().int().min(1).max(10).default(1),
});

export const USAGE = `usage: deno task bench speculative [--tokens N] [--k K] [--batches 1,4]
       [--acceptance 0,0.5,0.8,1] [--rounds N]

On the SmolLM2-135M-shaped random model: decode tokens/s per stream speculating with K drafts
per step, at each acceptance rate p (a drafter proposing the target's recorded greedy tokens, each
with probability p), against no speculation, at each batch size (goal at batch 1, k = 4: >= 1.5x at
p = 0.8, >= 0.95x at p = 0).

  --tokens N       tokens each stream decodes (default 48)
  --k K            drafts per speculating step (default 4)
  --batches LIST   streams decoding together (default 1,4)
  --acceptance P   acceptance rates (default 0,0.5,0.8,1)
  --rounds N       times each cell is measured, interleaved with its baseline; medians (default 1)`;

interface Run {
  /** Mean over streams of tokens after the first, per second from the first token to the last. */
  tokensPerS: number;
  outputs: number[][];
  stats: RuntimeStats;
}

async function measure(runtime: Runtime, batch: number, tokens: number, vocab: number) {
  const handles = Array.from(
    { length: batch },
    (_, i) =>
      runtime.submit({
        ids: prompt(i + 1, 16, vocab),
        maxTokens: tokens,
        sampling: GREEDY,
        stopIds: [],
      }),
  );
  const streams = await Promise.all(handles.map(async (h) => {
    const ids: number[] = [];
    let first = 0;
    for await (const t of h.tokens) {
      if (ids.push(t.id) === 1) first = performance.now();
    }
    await h.done;
    return { ids, rate: (ids.length - 1) / ((performance.now() - first) / 1000) };
  }));
  const rate = streams.reduce((a, s) => a + s.rate, 0) / batch;
  return { tokensPerS: rate, outputs: streams.map((s) => s.ids), stats: runtime.stats() };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export type SpeculativeFlags = z.infer<typeof Flags>;

export async function benchSpeculative(args: string[]): Promise<string> {
  return speculativeReport(
    parseBenchFlags(Flags, args),
    await smolShapedModelDir(),
    "SmolLM2-135M shape",
  );
}

/** The report's rows for the model in `dir` (`shape` names it in the heading). */
export async function speculativeReport(
  flags: SpeculativeFlags,
  dir: string,
  shape: string,
): Promise<string> {
  const maxSlots = Math.max(...flags.batches) * (flags.k + 1);
  const engine = await Engine.load({
    modelDir: dir,
    gpu: await openGpu(),
    maxSlots,
    maxRows: 128,
    gpuKvMb: 128,
    maxDecodeSteps: DEFAULT_DECODE_STEPS,
    profileCosts: true, // what the draft length is weighed on (runtime/speculative/draft_length.ts)
  });
  const V = engine.info.vocabSize;
  // Each runtime closes its view of the engine, not the engine.
  const shared: StepEngine = {
    info: engine.info,
    step: (plan) => engine.step(plan),
    close: () => Promise.resolve(),
  };
  const open = (drafter?: TraceDrafter) =>
    new Runtime(shared, {
      policy: "fcfs",
      maxQueue: 64,
      maxTokensLimit: 100_000,
      eosIds: [],
      decodeSteps: DEFAULT_DECODE_STEPS,
      ...(drafter ? { speculative: "ngram" as const, speculativeTokens: flags.k } : {}),
    }, drafter ? { drafter } : {});
  const run = async (batch: number, drafter?: TraceDrafter): Promise<Run> => {
    const runtime = open(drafter);
    try {
      return await measure(runtime, batch, flags.tokens, V);
    } finally {
      await runtime.close();
    }
  };

  const rows: string[] = [];
  for (const batch of flags.batches) {
    // The trace: this batch's greedy tokens without speculation (also a warm-up).
    const trace = await run(batch);
    const ratios = new Map<number, number[]>();
    const baseRates: number[] = [];
    for (let round = 0; round < flags.rounds; round++) {
      for (const p of flags.acceptance) {
        // Each cell against a baseline measured just before it: the machine's load drifts.
        const base = await run(batch);
        baseRates.push(base.tokensPerS);
        const drafter = new TraceDrafter(p, V, 17 + round);
        trace.outputs.forEach((out, i) => drafter.record(prompt(i + 1, 16, V), out));
        const spec = await run(batch, drafter);
        if (JSON.stringify(spec.outputs) !== JSON.stringify(trace.outputs)) {
          throw new Error(
            `batch ${batch}, p = ${p}: speculative tokens differ from plain decoding`,
          );
        }
        const s = spec.stats.speculation!;
        ratios.set(p, [...(ratios.get(p) ?? []), spec.tokensPerS / base.tokensPerS]);
        const tokensPerVerification = s.drafts > 0 ? 1 + s.acceptedTokens / s.drafts : 1;
        rows.push(
          `| ${batch} | ${p} | ${s.drafts} | ${s.draftTokens} | ${s.acceptedTokens} | ` +
            `${tokensPerVerification.toFixed(2)} | ${
              (spec.tokensPerS / base.tokensPerS).toFixed(2)
            }× |`,
        );
      }
    }
    rows.push(
      `| ${batch} | (no speculation) | | | | | 1.00× (${
        median(baseRates).toFixed(1)
      } tok/s/stream) |`,
    );
    const at = (p: number) => ratios.has(p) ? median(ratios.get(p)!) : NaN;
    if (batch === 1) {
      rows.push(
        `| | goal, batch 1: p = 0.8 ${at(0.8).toFixed(2)}× (>= 1.5×: ${
          at(0.8) >= 1.5 ? "met" : "not met"
        }), ` +
          `p = 0 ${at(0).toFixed(2)}× (>= 0.95×: ${at(0) >= 0.95 ? "met" : "not met"}) | | | | | |`,
      );
    }
  }
  const info = engine.info;
  await engine.close();
  return [
    `### Speculative decoding (${info.adapter}, ${info.dtype}, ${shape}, random weights)`,
    "",
    `${flags.tokens} greedy tokens per stream, k = ${flags.k}, ${flags.rounds} round(s); the ratio is`,
    "per-stream tokens/s (after the first token) against the same batch without speculation",
    "measured just before it (the machine's load drifts), both",
    "with decode groups of up to 8 steps. The drafter proposes the target's recorded tokens, each",
    "with probability p (a controlled acceptance rate: a random model accepts almost nothing a real",
    "drafter proposes). Each request drafts only as many tokens as pay at its acceptance so far,",
    "on the profiled step cost with the readback round trip (none for a while where none pays), so",
    "p = 0 runs mostly as plain decoding. Every speculating run's tokens equal the plain run's.",
    "",
    "| batch | p | verifications | draft tokens | accepted | tokens per verification | tokens/s vs none |",
    "|---|---|---|---|---|---|---|",
    ...rows,
  ].join("\n");
}
