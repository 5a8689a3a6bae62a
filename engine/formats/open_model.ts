// Opens a local model in either format: a GGUF file (told by its magic bytes, since Ollama's
// blobs have no extension) or a Hugging Face directory of safetensors. Both come back as
// ModelFiles, checked before any weight is read; nothing past here asks which format it was,
// except the weight loader.

import { resolve } from "node:path";
import { ModelLoadError } from "../model/errors.ts";
import { isGgufFile } from "./gguf.ts";
import { openGgufModel } from "./gguf_model.ts";
import { openHfDir } from "./hf_dir.ts";
import type { ModelFiles } from "./model_files.ts";

export async function openModelDir(dir: string): Promise<ModelFiles> {
  const root = resolve(dir);
  let stat: Deno.FileInfo;
  try {
    stat = await Deno.stat(root);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) throw new ModelLoadError(root, "no such directory");
    throw e;
  }
  if (stat.isFile && await isGgufFile(root)) return openGgufModel(root);
  if (!stat.isDirectory) throw new ModelLoadError(root, "not a directory or a GGUF file");
  return openHfDir(root);
}
