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

/** Where generated bench models are kept ($SLUICE_CACHE, else ~/.cache/sluice). */
export function benchCacheDir(): string {
  return Deno.env.get("SLUICE_CACHE") ?? `${Deno.env.get("HOME") ?? "/tmp"}/.cache/sluice`;
}

export async function smolShapedModelDir(): Promise<string> {
  const dir = `${benchCacheDir()}/bench-smollm2-shape-v1`;
  try {
    await Deno.stat(`${dir}/config.json`);
  } catch {
    console.error(`writing a SmolLM2-shaped random model to ${dir} ...`);
    const tmp = `${dir}.tmp-${Deno.pid}`;
    await writeTinyModel(tmp, SMOLLM2_SHAPE);
    await Deno.rename(tmp, dir);
  }
  return dir;
}
