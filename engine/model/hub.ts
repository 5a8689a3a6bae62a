// Turns the --model argument into a local model directory: "demo" (a generated random model), a
// directory that exists, or a Hugging Face hub id, downloaded once into the cache with a progress
// bar. A download lands in a temporary directory that is renamed into place only when complete,
// so an interrupted download never looks like a model.

import { join } from "node:path";
import { demoModelDir, sluiceCacheDir } from "./tiny_model.ts";

export const DEFAULT_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct";

const HUB_URL = "https://huggingface.co";
const HUB_ID = /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/;

/** The model could not be found or fetched; the message says what to do instead. */
export class ModelResolveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ModelResolveError";
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
  if (!HUB_ID.test(arg) || arg.includes("..")) {
    throw new ModelResolveError(
      `--model ${arg}: no such directory, and not a Hugging Face model id (org/name). ` +
        `Pass a local model directory (--model /path/to/dir) or --model demo.`,
    );
  }

  const cacheDir = join(options.cacheDir ?? sluiceCacheDir(), "hub");
  const target = join(cacheDir, arg.replace("/", "--"));
  if (await isDir(target)) {
    log(`model ${arg}: using cached ${target}`);
    return target;
  }
  log(`model ${arg}: downloading from ${HUB_URL} into ${target}`);
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
  readonly #fetch: typeof fetch;
  readonly #onProgress: (p: DownloadProgress) => void;

  constructor(id: string, options: ResolveOptions) {
    this.#id = id;
    this.#fetch = options.fetch ?? fetch;
    this.#onProgress = options.onProgress ?? stderrProgressBar();
  }

  /** Downloads one file into dir. Returns false for a 404 of an optional file. */
  async download(file: string, dir: string, { required }: { required: boolean }): Promise<boolean> {
    const url = `${HUB_URL}/${this.#id}/resolve/main/${file}`;
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
      );
    } finally {
      out.close();
    }
    if (totalBytes !== null && doneBytes !== totalBytes) {
      throw new ModelResolveError(
        `download of ${this.#id}/${file} ended after ${doneBytes} of ${totalBytes} bytes. ` +
          `Run again to retry, or pass --model /path/to/dir.`,
      );
    }
    this.#onProgress({ file, doneBytes, totalBytes: totalBytes ?? doneBytes });
  }
}

/** A one-line bar redrawn in place on a terminal, or a line per quarter otherwise. */
function stderrProgressBar(): (p: DownloadProgress) => void {
  const encoder = new TextEncoder();
  const tty = Deno.stderr.isTerminal();
  let lastDraw = 0;
  let lastQuarter = -1;
  let lastFile = "";
  return ({ file, doneBytes, totalBytes }) => {
    const done = totalBytes !== null && doneBytes >= totalBytes;
    if (file !== lastFile) {
      lastFile = file;
      lastQuarter = -1;
    }
    const fraction = totalBytes ? Math.min(1, doneBytes / totalBytes) : 0;
    const sizes = `${mib(doneBytes)}/${totalBytes === null ? "?" : mib(totalBytes)} MiB`;
    if (tty) {
      const now = Date.now();
      if (!done && now - lastDraw < 100) return;
      lastDraw = now;
      const width = 30;
      const filled = Math.round(fraction * width);
      const bar = "#".repeat(filled) + "-".repeat(width - filled);
      Deno.stderr.writeSync(encoder.encode(`\r${file} [${bar}] ${sizes}${done ? "\n" : ""}`));
    } else {
      const quarter = done ? 4 : Math.floor(fraction * 4);
      if (quarter === lastQuarter) return;
      lastQuarter = quarter;
      Deno.stderr.writeSync(encoder.encode(`${file}: ${sizes}\n`));
    }
  };
}

function mib(bytes: number): string {
  return (bytes / (1024 * 1024)).toFixed(1);
}

async function isDir(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isDirectory;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}
