// The SmolLM2-135M-shaped random model the engine benchmarks run on (no download possible here),
// written once under the bench cache directory and reused.

import { writeTinyModel } from "../../engine/bench_api.ts";

/** SmolLM2-135M's shape with random weights. */
export const SMOLLM2_SHAPE = {
  hiddenSize: 576,
  intermediateSize: 1536,
  numLayers: 30,
  numHeads: 9,
  numKvHeads: 3,
  vocabSize: 49152,
  tied: true,
  dtype: "BF16",
  maxPositionEmbeddings: 8192,
  ropeTheta: 100000,
  seed: 135,
} as const;

/**
 * A small shape for the short runs of composite benches (`bench gpu --short`): every matrix a whole
 * number of 256-value blocks, so each GGUF type applies to every tensor as on a real model.
 */
export const SHORT_SHAPE = {
  hiddenSize: 256,
  intermediateSize: 768,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  tied: true,
  dtype: "F16",
  maxPositionEmbeddings: 2048,
  seed: 256,
} as const;

export type BenchShape = "smol" | "short";

/** Where generated bench models are kept ($SLUICE_CACHE, else ~/.cache/sluice). */
export function benchCacheDir(): string {
  return Deno.env.get("SLUICE_CACHE") ?? `${Deno.env.get("HOME") ?? "/tmp"}/.cache/sluice`;
}

export function smolShapedModelDir(): Promise<string> {
  return shapedModelDir("smol");
}

/** The random model of a bench shape, written once. */
export async function shapedModelDir(shape: BenchShape): Promise<string> {
  const dir = `${benchCacheDir()}/${
    shape === "smol" ? "bench-smollm2-shape-v1" : "bench-short-shape-v1"
  }`;
  try {
    await Deno.stat(`${dir}/config.json`);
  } catch {
    console.error(
      `writing a ${shape === "smol" ? "SmolLM2" : "short"}-shaped random model to ${dir} ...`,
    );
    const tmp = `${dir}.tmp-${Deno.pid}`;
    await writeTinyModel(tmp, shape === "smol" ? SMOLLM2_SHAPE : SHORT_SHAPE);
    await Deno.rename(tmp, dir);
  }
  return dir;
}
