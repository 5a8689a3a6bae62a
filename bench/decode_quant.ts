// `bench decode --quant`: decode tokens/s at batch 1 and 16 and weight bytes read per token of the
// SmolLM2-shaped model as GGUF files of each quantization, each as a ratio to f16. All engines are
// loaded at once and measured round by round, in a rotating order, so drifting load on a shared
// machine hits every kind alike; ratios are taken within a round and their medians reported.
// measureDecodeQuant returns the numbers, formatDecodeQuant the report (bench speed uses both).

import { type Engine, openGpu } from "../engine/engine.ts";
import { hasIntDot } from "../engine/bench_api.ts";
import type { Runtime } from "../runtime/service.ts";
import { loadDecodeRuntime, measureDecode } from "./decode_measure.ts";
import { describeRecipe, MIX_KINDS, type QuantKind, smolShapedGguf } from "./gguf_models.ts";

export const QUANT_BATCHES = [1, 16] as const;
export type QuantBatch = typeof QUANT_BATCHES[number];

/** What `bench decode --quant` measured; formatDecodeQuant writes its report. */
export interface DecodeQuantResult {
  adapter: string;
  /** f16 first: the baseline of every ratio. */
  kinds: QuantKind[];
  /**
   * Quantized kinds also measured with the integer-dot kernels (--quant-kernels int), keyed
   * `${kind} int` in tokensPerS and weightBytes; empty where the runtime lacks them or not asked.
   */
  intKinds?: QuantKind[];
  steps: number;
  rounds: number;
  /** Decode tokens/s of each kind at each batch size, one figure per round in round order. */
  tokensPerS: Record<string, Record<QuantBatch, number[]>>;
  /** Bytes of every weight buffer on the GPU, per kind. */
  weightBytes: Record<string, number>;
}

export async function measureDecodeQuant(
  requested: QuantKind[],
  steps: number,
  rounds: number,
  /** Also measure each quantized kind with the integer-dot kernels (where the runtime has them). */
  intKernels = false,
): Promise<DecodeQuantResult> {
  // f16 is the baseline of every ratio.
  const kinds: QuantKind[] = ["f16", ...requested.filter((k) => k !== "f16")];
  const paths = new Map<QuantKind, string>();
  for (const kind of kinds) paths.set(kind, await smolShapedGguf(kind));
  const intKinds = intKernels && hasIntDot() ? kinds.filter((k) => k !== "f16") : [];
  // Each engine by its key: the kind (float kernels), or `${kind} int`.
  const keys = [...kinds, ...intKinds.map((k) => `${k} int`)];

  const gpu = await openGpu();
  const loaded = new Map<string, { engine: Engine; runtime: Runtime }>();
  for (const key of keys) {
    const t0 = performance.now();
    const [kind, int] = key.split(" ") as [QuantKind, string | undefined];
    loaded.set(key, await loadDecodeRuntime(gpu, paths.get(kind)!, int ? "int" : "float"));
    console.error(`loaded ${key} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  }

  const tokS: DecodeQuantResult["tokensPerS"] = Object.fromEntries(
    keys.map((k) => [k, { 1: [], 16: [] }]),
  );
  for (let round = 0; round < rounds; round++) {
    const order = keys.map((_, i) => keys[(i + round) % keys.length]);
    for (const kind of order) {
      const { engine, runtime } = loaded.get(kind)!;
      for (const batch of QUANT_BATCHES) {
        const run = await measureDecode(runtime, engine.info.vocabSize, batch, steps);
        tokS[kind][batch].push(run.tokensPerS);
        console.error(`round ${round + 1}: ${kind} batch ${batch}: ${run.tokensPerS.toFixed(2)}`);
      }
    }
  }
  const result: DecodeQuantResult = {
    adapter: loaded.get("f16")!.engine.info.adapter,
    kinds,
    intKinds,
    steps,
    rounds,
    tokensPerS: tokS,
    weightBytes: Object.fromEntries(keys.map((k) => [k, loaded.get(k)!.engine.info.weightBytes])),
  };
  for (const { runtime } of loaded.values()) await runtime.close();
  gpu.device.destroy();
  return result;
}

/**
 * Median over rounds of `kind`'s tokens/s divided by f16's in the same round; null when either
 * was not measured.
 */
export function quantRatio(r: DecodeQuantResult, kind: string, batch: QuantBatch): number | null {
  const ours = r.tokensPerS[kind]?.[batch], f16 = r.tokensPerS["f16"]?.[batch];
  if (!ours?.length || !f16?.length) return null;
  return median(ours.slice(0, f16.length).map((x, i) => x / f16[i]));
}

/** `bench decode --quant`'s Markdown report of a measurement. */
export function formatDecodeQuant(r: DecodeQuantResult): string {
  const { kinds, steps, rounds } = r;
  const keys = [...kinds, ...(r.intKinds ?? []).map((k) => `${k} int`)];
  const tokS = r.tokensPerS;
  const bytes = (k: string) => r.weightBytes[k];
  const ratio = (k: string, b: QuantBatch) => quantRatio(r, k, b) ?? NaN;
  const mb = (n: number) => (n / 2 ** 20).toFixed(1);
  const rows = keys.map((k) => {
    const t = tokS[k];
    return `| ${k} | ${median(t[1]).toFixed(2)} | ${ratio(k, 1).toFixed(2)}× | ${
      median(t[16]).toFixed(1)
    } | ${ratio(k, 16).toFixed(2)}× | ${mb(bytes(k))} | ${mb(bytes(k) / 16)} | ${
      (bytes(k) / bytes("f16")).toFixed(3)
    }× |`;
  });
  const perRound = keys.flatMap((k) =>
    QUANT_BATCHES.map((b) => `| ${k} | ${b} | ${tokS[k][b].map((x) => x.toFixed(2)).join(" · ")} |`)
  );
  const q40 = kinds.includes("q4_0") ? ratio("q4_0", 1) : null;
  return [
    `### Quantized decode (${r.adapter}, SmolLM2-135M shape, random weights, GGUF)`,
    "",
    `${rounds} rounds of ${steps} decode steps per kind and batch size, kinds in a rotating order; ` +
    `tokens/s are medians over rounds, ratios are medians of the per-round ratio to f16. ` +
    `Weight bytes: every weight buffer on the GPU, all read once per decode step (the tied ` +
    `embedding table is the output head); per token at batch 16 is a sixteenth of it. ` +
    `"KIND int": the same file with the integer-dot kernels (--quant-kernels int); the others ` +
    `with the float kernels.`,
    "",
    "| kind | batch 1 tokens/s | ÷ f16 | batch 16 tokens/s | ÷ f16 | weight MiB/token, batch 1 | batch 16 | bytes ÷ f16 |",
    "|---|---|---|---|---|---|---|---|",
    ...rows,
    "",
    ...(q40 === null ? [] : [
      `Goal (issue 11): Q4_0 ≥ 2.5× f16 at batch 1. Measured: ${q40.toFixed(2)}× — ${
        q40 >= 2.5 ? "met" : "not met"
      }.`,
      "",
    ]),
    "Per round (tokens/s, in round order):",
    "",
    "| kind | batch | rounds |",
    "|---|---|---|",
    ...perRound,
    ...kinds.filter((k) => (MIX_KINDS as readonly string[]).includes(k)).flatMap((k) => [
      "",
      `${k} recipe (llama.cpp's ${k.toUpperCase()} choices for this shape):`,
      "",
      ...describeRecipe(k),
    ]),
  ].join("\n");
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}
