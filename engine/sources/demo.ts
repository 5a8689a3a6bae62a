// `--model demo`: a small random model generated once into Sluice's cache, so the server runs and
// answers (with noise) on any machine, with no download.

import { join } from "node:path";
import { createDirAtomically } from "../util/atomic_dir.ts";
import { sluiceCacheDir } from "../util/cache_dir.ts";
import { isDir } from "../util/path_exists.ts";
import { type TinyModelSpec, writeTinyModel } from "./tiny_model.ts";

export const DEMO_SPEC: TinyModelSpec = {
  hiddenSize: 256,
  intermediateSize: 688,
  numLayers: 4,
  numHeads: 8,
  numKvHeads: 2,
  tied: true,
  dtype: "F16",
  seed: 20240601,
};

/** The cached demo model directory, generated on first use (atomically, via rename). */
export async function demoModelDir(): Promise<string> {
  const dir = join(sluiceCacheDir(), "demo-v1");
  if (await isDir(dir)) return dir;
  await createDirAtomically(dir, ".demo-v1-", (tmp) => writeTinyModel(tmp, DEMO_SPEC));
  return dir;
}
