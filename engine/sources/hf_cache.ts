// Finds a model that Hugging Face's own tools (huggingface-cli, transformers, llama.cpp's -hf)
// already downloaded, so Sluice reuses it instead of fetching it again. The cache root and the
// repository folder's name come from @huggingface/hub (HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME,
// else ~/.cache/huggingface/hub); inside it, refs/main names the snapshot of the main branch:
// models--org--name/snapshots/<commit>/, whose files link to blobs/.
//
// A snapshot with config.json is a safetensors model directory. Otherwise its GGUF files are the
// candidates: `org/name:file.gguf` names one, `org/name:Q8_0` picks the file whose name holds
// that quantization, and plain `org/name` takes the only one, else Q4_K_M, else the first of
// PREFERRED that is there. A model split over several files (NAME-00001-of-00003.gguf) is a
// candidate by its first part.

import { join } from "node:path";
import { getHFHubCachePath, getRepoFolderName } from "@huggingface/hub";
import { ModelResolveError } from "./resolve_error.ts";
import { pathExists } from "../util/path_exists.ts";
import { isLaterSplitPart } from "../formats/gguf_split.ts";

const PREFERRED = ["Q4_K_M", "Q8_0", "Q4_0", "Q4_K_S", "Q6_K", "F16", "BF16", "F32"];

export function hfCacheDir(): string {
  return getHFHubCachePath();
}

/**
 * The local path of `id` (org/name) in the Hugging Face cache, with `file` (a GGUF file name or a
 * quantization label) choosing among GGUF files; null when the repository is not cached.
 */
export async function findInHfCache(
  id: string,
  file: string | undefined,
  cacheDir = hfCacheDir(),
): Promise<string | null> {
  const repoDir = join(cacheDir, getRepoFolderName({ name: id, type: "model" }));
  const snapshot = await mainSnapshot(repoDir);
  if (snapshot === null) return null;
  if (file === undefined && await pathExists(join(snapshot, "config.json"))) return snapshot;

  const ggufs = await ggufFilesIn(snapshot);
  const label = `${id} in the Hugging Face cache (${snapshot})`;
  if (file !== undefined && /\.gguf$/i.test(file)) {
    if (ggufs.includes(file)) return join(snapshot, file);
    throw new ModelResolveError(`${file} is not in ${label}; it has: ${listed(ggufs)}`);
  }
  // A split model is its first part (gguf_split.ts opens the rest beside it).
  const single = ggufs.filter((f) => !isLaterSplitPart(f));
  const matching = (quant: string) =>
    single.find((f) => new RegExp(`[-._]${quant}[-._]`, "i").test(f.replace(/\.gguf$/i, ".")));
  let chosen: string | undefined;
  if (file !== undefined) {
    chosen = matching(file);
    if (!chosen) {
      throw new ModelResolveError(`no ${file} GGUF file in ${label}; it has: ${listed(ggufs)}`);
    }
  } else {
    chosen = single.length === 1 ? single[0] : PREFERRED.map(matching).find(Boolean) ?? single[0];
  }
  if (!chosen) {
    throw new ModelResolveError(
      `${label} has neither config.json nor a GGUF model; it has: ${listed(ggufs)}`,
    );
  }
  return join(snapshot, chosen);
}

/** snapshots/<refs/main>, else the only snapshot; null when there is none. */
async function mainSnapshot(repoDir: string): Promise<string | null> {
  try {
    const commit = (await Deno.readTextFile(join(repoDir, "refs", "main"))).trim();
    if (/^[0-9a-f]{40}$/.test(commit) && await pathExists(join(repoDir, "snapshots", commit))) {
      return join(repoDir, "snapshots", commit);
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  const snapshots: string[] = [];
  try {
    for await (const e of Deno.readDir(join(repoDir, "snapshots"))) {
      if (e.isDirectory) snapshots.push(e.name);
    }
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
  return snapshots.length === 1 ? join(repoDir, "snapshots", snapshots[0]) : null;
}

/** GGUF files of a snapshot, at its top level and one folder down ("Q4_K_M/x.gguf"). */
async function ggufFilesIn(snapshot: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(snapshot)) {
    if (!e.isDirectory && /\.gguf$/i.test(e.name)) out.push(e.name);
    if (e.isDirectory) {
      for await (const inner of Deno.readDir(join(snapshot, e.name))) {
        if (!inner.isDirectory && /\.gguf$/i.test(inner.name)) out.push(`${e.name}/${inner.name}`);
      }
    }
  }
  return out.sort();
}

function listed(files: string[]): string {
  return files.length === 0 ? "no GGUF files" : files.join(", ");
}
