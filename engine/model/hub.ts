// Turns the --model argument into a local model directory or GGUF file: "demo" (a generated random
// model), a directory or .gguf file that exists, "ollama:NAME[:TAG]" (Ollama's store), or a Hugging
// Face hub id ("org/name", or "org/name:FILE.gguf" / "org/name:Q4_K_M" for a GGUF repository):
// taken from Hugging Face's own cache when another tool already fetched it, else downloaded once
// into Sluice's cache with a progress bar. A download lands in a temporary directory that is renamed into place only when complete,
// so an interrupted download never looks like a model. The hub's address is $HF_ENDPOINT when set
// (as Hugging Face's own tools read it: a mirror, or a dead address that fails fast in tests).

import { join } from "node:path";
import { progressBar } from "../util/progress.ts";
import { findInHfCache } from "./hf_cache.ts";
import { resolveOllamaModel } from "./ollama_store.ts";
import { demoModelDir, sluiceCacheDir } from "./tiny_model.ts";

export const DEFAULT_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct";

const DEFAULT_HUB_URL = "https://huggingface.co";
const HUB_ID = /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/;

/**
 * The model could not be found or fetched; the message says what to do instead, `reason` says
 * only what went wrong (for a notice that gives its own advice).
 */
export class ModelResolveError extends Error {
  readonly reason: string;
  constructor(message: string, reason = message) {
    super(message);
    this.name = "ModelResolveError";
    this.reason = reason;
  }
}

export interface DownloadProgress {
  file: string;
  doneBytes: number;
  /** null when the server did not say. */
  totalBytes: number | null;
}

export interface ResolveOptions {
  /** Replaces globalThis.fetch (tests serve files from memory). */
  fetch?: typeof fetch;
  /** Cache root; defaults to $SLUICE_CACHE or ~/.cache/sluice. */
  cacheDir?: string;
  /** Called as bytes arrive; defaults to a progress bar on stderr. */
  onProgress?: (p: DownloadProgress) => void;
  /** The hub's base URL; defaults to $HF_ENDPOINT, else https://huggingface.co. */
  hubUrl?: string;
}

function hubUrlOf(options: ResolveOptions): string {
  return (options.hubUrl ?? (Deno.env.get("HF_ENDPOINT") || DEFAULT_HUB_URL)).replace(/\/+$/, "");
}

export async function resolveModel(
  arg: string,
  log: (msg: string) => void,
  options: ResolveOptions = {},
): Promise<string> {
  if (arg === "demo") {
    const dir = await demoModelDir();
    log(
      `*** --model demo: a small RANDOM model (${dir}). Its output is noise; use it to exercise ` +
        `the server, not to read answers. ***`,
    );
    return dir;
  }
  if (await isDir(arg)) return arg;
  if (arg.startsWith("ollama:")) return await resolveOllamaModel(arg.slice("ollama:".length), log);
  if (await isFile(arg)) return arg; // a GGUF file (openModelDir checks its magic)
  if (/\.gguf$/i.test(arg) && !arg.includes(":")) {
    throw new ModelResolveError(`--model ${arg}: no such GGUF file`);
  }
  const [hubId, hubFile] = splitHubRef(arg);
  if (HUB_ID.test(hubId) && !arg.includes("..")) {
    const cached = await findInHfCache(hubId, hubFile);
    if (cached !== null) {
      log(`model ${arg}: using ${cached} from the Hugging Face cache`);
      return cached;
    }
    if (hubFile !== undefined) {
      throw new ModelResolveError(
        `--model ${arg}: ${hubId} is not in the Hugging Face cache; fetch it first (e.g. ` +
          `huggingface-cli download ${hubId}), or pass the .gguf file's path`,
      );
    }
  }
  if (!HUB_ID.test(arg) || arg.includes("..")) {
    throw new ModelResolveError(
      `--model ${arg}: no such directory, and not a Hugging Face model id (org/name). ` +
        `Pass a local model directory (--model /path/to/dir), a .gguf file, ` +
        `ollama:NAME[:TAG], or --model demo.`,
    );
  }

  const cacheDir = join(options.cacheDir ?? sluiceCacheDir(), "hub");
  const target = join(cacheDir, arg.replace("/", "--"));
  if (await isDir(target)) {
    log(`model ${arg}: using cached ${target}`);
    return target;
  }
  log(`model ${arg}: downloading from ${hubUrlOf(options)} into ${target}`);
  await Deno.mkdir(cacheDir, { recursive: true });
  const tmp = await Deno.makeTempDir({
    dir: cacheDir,
    prefix: `.download-${arg.replace("/", "--")}-`,
  });
  try {
    await downloadModel(arg, tmp, options);
    await Deno.rename(tmp, target);
  } catch (e) {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
    if (await isDir(target)) return target; // a concurrent download finished first
    throw e;
  }
  log(`model ${arg}: ready in ${target}`);
  return target;
}

async function downloadModel(id: string, dir: string, options: ResolveOptions): Promise<void> {
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

  constructor(id: string, options: ResolveOptions) {
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

/** "org/name:file" → ["org/name", "file"]; "org/name" → ["org/name", undefined]. */
function splitHubRef(arg: string): [string, string | undefined] {
  const colon = arg.indexOf(":");
  return colon < 0 ? [arg, undefined] : [arg.slice(0, colon), arg.slice(colon + 1)];
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

async function isDir(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isDirectory;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}
