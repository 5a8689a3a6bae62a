// Downloads a Hugging Face hub model ("org/name", safetensors) once into Sluice's cache, with a
// progress bar. A download lands in a temporary directory that is renamed into place only when
// complete, so an interrupted download never looks like a model. The hub's address is $HF_ENDPOINT
// when set (as Hugging Face's own tools read it: a mirror, or a dead address that fails fast in
// tests).

import { join } from "node:path";
import { createDirAtomically } from "../util/atomic_dir.ts";
import { sluiceCacheDir } from "../util/cache_dir.ts";
import { isDir } from "../util/path_exists.ts";
import { progressBar } from "../util/progress.ts";
import { ModelResolveError } from "./resolve_error.ts";

const DEFAULT_HUB_URL = "https://huggingface.co";
/** What a hub model id looks like: org/name. */
export const HUB_ID = /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/;

export interface DownloadProgress {
  file: string;
  doneBytes: number;
  /** null when the server did not say. */
  totalBytes: number | null;
}

export interface HubOptions {
  /** Replaces globalThis.fetch (tests serve files from memory). */
  fetch?: typeof fetch;
  /** Cache root; defaults to $SLUICE_CACHE or ~/.cache/sluice. */
  cacheDir?: string;
  /** Called as bytes arrive; defaults to a progress bar on stderr. */
  onProgress?: (p: DownloadProgress) => void;
  /** The hub's base URL; defaults to $HF_ENDPOINT, else https://huggingface.co. */
  hubUrl?: string;
}

function hubUrlOf(options: HubOptions): string {
  return (options.hubUrl ?? (Deno.env.get("HF_ENDPOINT") || DEFAULT_HUB_URL)).replace(/\/+$/, "");
}

/** The local directory of hub model `id` (org/name), downloaded first unless already cached. */
export async function fetchFromHub(
  id: string,
  log: (msg: string) => void,
  options: HubOptions,
): Promise<string> {
  const cacheDir = join(options.cacheDir ?? sluiceCacheDir(), "hub");
  const target = join(cacheDir, id.replace("/", "--"));
  if (await isDir(target)) {
    log(`model ${id}: using cached ${target}`);
    return target;
  }
  log(`model ${id}: downloading from ${hubUrlOf(options)} into ${target}`);
  const placed = await createDirAtomically(
    target,
    `.download-${id.replace("/", "--")}-`,
    (tmp) => downloadModel(id, tmp, options),
  );
  // Not placed: a concurrent download finished first.
  if (placed) log(`model ${id}: ready in ${target}`);
  return target;
}

async function downloadModel(id: string, dir: string, options: HubOptions): Promise<void> {
  const fetcher = new HubFetcher(id, options);
  for (const file of ["config.json", "tokenizer.json", "tokenizer_config.json"]) {
    await fetcher.download(file, dir, { required: true });
  }
  await fetcher.download("generation_config.json", dir, { required: false });
  if (await fetcher.download("model.safetensors", dir, { required: false })) return;

  const indexFile = "model.safetensors.index.json";
  if (!(await fetcher.download(indexFile, dir, { required: false }))) {
    throw new ModelResolveError(
      `${id} has neither model.safetensors nor ${indexFile} (only safetensors checkpoints are ` +
        `supported). Pass a local model directory (--model /path/to/dir) or --model demo.`,
      `${id} has no safetensors weights`,
    );
  }
  const index = JSON.parse(await Deno.readTextFile(join(dir, indexFile)));
  const shards = new Set(Object.values(index?.weight_map ?? {}));
  for (const shard of shards) {
    // The index comes from the network: accept plain sibling file names only.
    if (typeof shard !== "string" || !/^[\w][\w.-]*\.safetensors$/.test(shard)) {
      throw new ModelResolveError(
        `${id}: ${indexFile} names an odd shard ${JSON.stringify(shard)}`,
      );
    }
    await fetcher.download(shard, dir, { required: true });
  }
}

class HubFetcher {
  readonly #id: string;
  readonly #hubUrl: string;
  readonly #fetch: typeof fetch;
  readonly #onProgress: (p: DownloadProgress) => void;

  constructor(id: string, options: HubOptions) {
    this.#id = id;
    this.#hubUrl = hubUrlOf(options);
    this.#fetch = options.fetch ?? fetch;
    this.#onProgress = options.onProgress ?? stderrProgressBar();
  }

  /** Downloads one file into dir. Returns false for a 404 of an optional file. */
  async download(file: string, dir: string, { required }: { required: boolean }): Promise<boolean> {
    const url = `${this.#hubUrl}/${this.#id}/resolve/main/${file}`;
    let response: Response;
    try {
      const token = Deno.env.get("HF_TOKEN");
      response = await this.#fetch(
        url,
        token ? { headers: { authorization: `Bearer ${token}` } } : {},
      );
    } catch (e) {
      throw new ModelResolveError(
        `cannot download ${this.#id} (${file}): the network is unavailable ` +
          `(${(e as Error).message}). Pass a local model directory with --model /path/to/dir ` +
          `(a Hugging Face checkout with config.json, tokenizer files and safetensors), or use ` +
          `--model demo for a small random model.`,
        `the network is unavailable (${(e as Error).message})`,
      );
    }
    if (response.status === 404 && !required) {
      await response.body?.cancel();
      return false;
    }
    if (!response.ok) {
      await response.body?.cancel();
      const hint = response.status === 401 || response.status === 403
        ? " (gated or private: accept its license on huggingface.co and set HF_TOKEN)"
        : response.status === 404
        ? " (no such model or file)"
        : "";
      throw new ModelResolveError(
        `cannot download ${url}: HTTP ${response.status}${hint}. Pass a local model directory ` +
          `with --model /path/to/dir, or use --model demo.`,
        `${url} answered HTTP ${response.status}${hint}`,
      );
    }
    await this.#save(response, file, join(dir, file));
    return true;
  }

  async #save(response: Response, file: string, path: string): Promise<void> {
    const length = Number(response.headers.get("content-length"));
    const totalBytes = Number.isFinite(length) && length > 0 ? length : null;
    const out = await Deno.open(path, { write: true, create: true, truncate: true });
    let doneBytes = 0;
    try {
      if (response.body) {
        for await (const chunk of response.body) {
          let written = 0;
          while (written < chunk.length) written += await out.write(chunk.subarray(written));
          doneBytes += chunk.length;
          this.#onProgress({ file, doneBytes, totalBytes });
        }
      }
    } catch (e) {
      throw new ModelResolveError(
        `download of ${this.#id}/${file} broke off after ${doneBytes} bytes ` +
          `(${(e as Error).message}). Run again to retry, or pass --model /path/to/dir.`,
        `the download of ${file} broke off (${(e as Error).message})`,
      );
    } finally {
      out.close();
    }
    if (totalBytes !== null && doneBytes !== totalBytes) {
      throw new ModelResolveError(
        `download of ${this.#id}/${file} ended after ${doneBytes} of ${totalBytes} bytes. ` +
          `Run again to retry, or pass --model /path/to/dir.`,
        `the download of ${file} ended early (${doneBytes} of ${totalBytes} bytes)`,
      );
    }
    this.#onProgress({ file, doneBytes, totalBytes: totalBytes ?? doneBytes });
  }
}

/** A progress bar per file on stderr (engine/util/progress.ts); a line per quarter in logs. */
function stderrProgressBar(): (p: DownloadProgress) => void {
  const bars = new Map<string, ReturnType<typeof progressBar>>();
  return ({ file, doneBytes, totalBytes }) => {
    let bar = bars.get(file);
    if (!bar) bars.set(file, bar = progressBar(file, { quarters: true }));
    bar(doneBytes, totalBytes);
  };
}
