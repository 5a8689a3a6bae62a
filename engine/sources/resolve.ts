// Turns the --model argument into a local model directory or GGUF file: "demo" (a generated random
// model), a directory or .gguf file that exists, "ollama:NAME[:TAG]" (Ollama's store), or a Hugging
// Face hub id ("org/name", or "org/name:FILE.gguf" / "org/name:Q4_K_M" for a GGUF repository):
// taken from Hugging Face's own cache when another tool already fetched it, else downloaded once
// into Sluice's cache (hub.ts).

import { isDir, isFile } from "../util/path_exists.ts";
import { demoModelDir } from "./demo.ts";
import { findInHfCache } from "./hf_cache.ts";
import { fetchFromHub, HUB_ID, type HubOptions } from "./hub.ts";
import { resolveOllamaModel } from "./ollama_store.ts";
import { ModelResolveError } from "./resolve_error.ts";

export async function resolveModel(
  arg: string,
  log: (msg: string) => void,
  options: HubOptions = {},
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

  return await fetchFromHub(arg, log, options);
}

/** "org/name:file" → ["org/name", "file"]; "org/name" → ["org/name", undefined]. */
function splitHubRef(arg: string): [string, string | undefined] {
  const colon = arg.indexOf(":");
  return colon < 0 ? [arg, undefined] : [arg.slice(0, colon), arg.slice(colon + 1)];
}
