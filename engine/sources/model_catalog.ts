// Every model one server can serve, each with a stable id: the --model arguments (resolved to local
// files before the port opens: a download happens at start, never inside a request), every model
// directory and .gguf file directly under --models-dir, and, when discovery is on, the models
// Hugging Face's tools and Ollama already put on this machine. Nothing is loaded here; an id is
// what clients send as `model`, and the first entry is the default.
//
// Ids: `--model NAME=SOURCE` names a model; otherwise a --model's id is the argument as given (as
// before the router), a --models-dir entry's is its file name (without .gguf), a Hugging Face
// cache entry's is org/name, an Ollama model's is name:tag (namespace/ and host/ kept when they
// are not Ollama's defaults). The first of two entries with one id wins.

import { join } from "node:path";
import { isLaterSplitPart } from "../formats/gguf_split.ts";
import { isDir, isFile } from "../util/path_exists.ts";
import { findInHfCache, hfCacheDir } from "./hf_cache.ts";
import { ollamaModelsDir, resolveOllamaModel } from "./ollama_store.ts";

export interface CatalogEntry {
  id: string;
  /** A local directory or .gguf file. */
  source: string;
  aliases: string[];
  /** The weights' bytes on disk (safetensors or GGUF). */
  sizeBytes: number;
}

export interface CatalogOptions {
  /** --model arguments, each "SOURCE" or "NAME=SOURCE", already resolvable to local files. */
  models: { arg: string; dir: string }[];
  modelsDir?: string;
  /** Also list the Hugging Face cache's and Ollama's models. */
  discover: boolean;
  hfCache?: string;
  ollamaStore?: string;
}

export async function catalogModels(options: CatalogOptions): Promise<CatalogEntry[]> {
  const entries: CatalogEntry[] = [];
  const add = async (id: string, source: string, aliases: string[] = []) => {
    if (entries.some((e) => e.id === id)) return;
    entries.push({ id, source, aliases, sizeBytes: await weightBytes(source) });
  };
  for (const { arg, dir } of options.models) {
    const named = /^([^=/\\]+)=(.+)$/.exec(arg);
    // NAME=org/name answers to both; a path is no name.
    if (named) {
      await add(
        named[1],
        dir,
        /^[.~/\\]/.test(named[2]) || await isDir(named[2]) ? [] : [named[2]],
      );
    } else await add(arg, dir);
  }
  if (options.modelsDir !== undefined) {
    for (const { id, path } of await modelsUnder(options.modelsDir)) await add(id, path);
  }
  if (options.discover) {
    for (const { id, path } of await hfCacheModels(options.hfCache ?? hfCacheDir())) {
      await add(id, path);
    }
    for (const { id, path } of await ollamaModels(options.ollamaStore ?? ollamaModelsDir())) {
      await add(id, path, [`ollama:${id}`]);
    }
  }
  return entries;
}

/** Model directories (with config.json) and .gguf files directly under `dir`. */
export async function modelsUnder(dir: string): Promise<{ id: string; path: string }[]> {
  const found: { id: string; path: string }[] = [];
  for (const name of await sortedNames(dir)) {
    const path = join(dir, name);
    if (await isFile(join(path, "config.json"))) found.push({ id: name, path });
    else if (/\.gguf$/i.test(name) && !isLaterSplitPart(name) && await isFile(path)) {
      found.push({ id: name.replace(/\.gguf$/i, ""), path });
    }
  }
  return found;
}

/** Repositories in the Hugging Face cache whose main snapshot holds a model. */
async function hfCacheModels(cache: string): Promise<{ id: string; path: string }[]> {
  const found: { id: string; path: string }[] = [];
  for (const name of await sortedNames(cache)) {
    const m = /^models--([^-].*?)--(.+)$/.exec(name);
    if (!m) continue;
    const id = `${m[1]}/${m[2]}`;
    try {
      const path = await findInHfCache(id, undefined, cache);
      if (path !== null) found.push({ id, path });
    } catch {
      // A repository with neither config.json nor a GGUF file is not a model; skip it.
    }
  }
  return found;
}

/** Every model in Ollama's store, by its manifests (host/namespace/name/tag). */
async function ollamaModels(store: string): Promise<{ id: string; path: string }[]> {
  const found: { id: string; path: string }[] = [];
  const root = join(store, "manifests");
  for (const host of await sortedNames(root)) {
    for (const ns of await sortedNames(join(root, host))) {
      for (const name of await sortedNames(join(root, host, ns))) {
        for (const tag of await sortedNames(join(root, host, ns, name))) {
          const prefix = host === "registry.ollama.ai"
            ? ns === "library" ? "" : `${ns}/`
            : `${host}/${ns}/`;
          const id = `${prefix}${name}:${tag}`;
          try {
            found.push({ id, path: await resolveOllamaModel(id, () => {}, store) });
          } catch {
            // A manifest whose blob is missing (an interrupted pull) is not offered.
          }
        }
      }
    }
  }
  return found;
}

/** Bytes of a model's weights on disk: a GGUF file, or a directory's .safetensors/.gguf files. */
async function weightBytes(source: string): Promise<number> {
  if (await isFile(source)) return (await Deno.stat(source)).size;
  if (!await isDir(source)) return 0;
  let sum = 0;
  for (const name of await sortedNames(source)) {
    if (/\.(safetensors|gguf)$/i.test(name)) sum += (await Deno.stat(join(source, name))).size;
  }
  return sum;
}

async function sortedNames(dir: string): Promise<string[]> {
  const names: string[] = [];
  try {
    for await (const e of Deno.readDir(dir)) names.push(e.name);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) return [];
    throw e;
  }
  return names.sort();
}

/** The id a --model argument alone would give (its NAME= prefix, else itself). */
export function modelArgId(arg: string): string {
  return /^([^=/\\]+)=/.exec(arg)?.[1] ?? arg;
}

/** The source part of a --model argument. */
export function modelArgSource(arg: string): string {
  return /^[^=/\\]+=(.+)$/.exec(arg)?.[1] ?? arg;
}
