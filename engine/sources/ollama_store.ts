// Finds a model pulled by Ollama (`ollama:NAME[:TAG]`) in Ollama's local store, read through its
// manifests as Ollama itself does: $OLLAMA_MODELS (else ~/.ollama/models) holds
// manifests/<host>/<namespace>/<name>/<tag>, a JSON manifest whose layer of media type
// application/vnd.ollama.image.model names the GGUF blob, stored as blobs/sha256-<hex>.
// Ollama's own chat template (a Go template) and parameters are not used: the GGUF's
// tokenizer.chat_template is.

import { join } from "node:path";
import { ModelResolveError } from "./resolve_error.ts";

const MODEL_LAYER = "application/vnd.ollama.image.model";
const DEFAULT_HOST = "registry.ollama.ai";
const DEFAULT_NAMESPACE = "library";

/** $OLLAMA_MODELS, else ~/.ollama/models. */
export function ollamaModelsDir(): string {
  const configured = Deno.env.get("OLLAMA_MODELS");
  if (configured) return configured;
  const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE") ?? ".";
  return join(home, ".ollama", "models");
}

/**
 * The manifest path parts of an Ollama model reference: "llama3.2", "llama3.2:1b",
 * "user/model:tag" or "hf.co/org/repo:Q4_K_M" (a first part with a dot is a registry host).
 */
export function parseOllamaName(ref: string): { host: string; path: string[]; tag: string } {
  const colon = ref.lastIndexOf(":");
  const slash = ref.lastIndexOf("/");
  const [name, tag] = colon > slash ? [ref.slice(0, colon), ref.slice(colon + 1)] : [ref, "latest"];
  const parts = name.split("/");
  const valid = /^[\w][\w.-]*$/;
  if (!tag.match(valid) || parts.some((p) => !valid.test(p) || p === "..") || parts.length > 3) {
    throw new ModelResolveError(
      `--model ollama:${ref}: not an Ollama model name (NAME, NAME:TAG or NAMESPACE/NAME:TAG)`,
    );
  }
  const host = parts.length > 1 && parts[0].includes(".") ? parts.shift()! : DEFAULT_HOST;
  if (parts.length === 1) parts.unshift(DEFAULT_NAMESPACE);
  return { host, path: parts, tag };
}

/** The GGUF blob of `ollama:<ref>`; throws ModelResolveError saying what is missing. */
export async function resolveOllamaModel(
  ref: string,
  log: (msg: string) => void,
  modelsDir = ollamaModelsDir(),
): Promise<string> {
  const { host, path, tag } = parseOllamaName(ref);
  const manifestPath = join(modelsDir, "manifests", host, ...path, tag);
  let manifest: { layers?: { mediaType?: string; digest?: string }[] };
  try {
    manifest = JSON.parse(await Deno.readTextFile(manifestPath));
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw new ModelResolveError(
        `--model ollama:${ref}: no manifest at ${manifestPath}. Pull it first (ollama pull ` +
          `${ref}), or set OLLAMA_MODELS to Ollama's models directory.`,
      );
    }
    throw new ModelResolveError(
      `--model ollama:${ref}: cannot read ${manifestPath} (${(e as Error).message})`,
    );
  }
  const layer = manifest.layers?.find((l) => l.mediaType === MODEL_LAYER);
  const digest = /^sha256:([0-9a-f]{64})$/.exec(layer?.digest ?? "");
  if (!digest) {
    throw new ModelResolveError(
      `--model ollama:${ref}: ${manifestPath} has no ${MODEL_LAYER} layer with a sha256 digest`,
    );
  }
  const blob = join(modelsDir, "blobs", `sha256-${digest[1]}`);
  try {
    await Deno.stat(blob);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
    throw new ModelResolveError(
      `--model ollama:${ref}: the model blob ${blob} named by ${manifestPath} is missing ` +
        `(an interrupted pull? run ollama pull ${ref} again)`,
    );
  }
  log(`model ollama:${ref}: using ${blob}`);
  return blob;
}
