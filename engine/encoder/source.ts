// Everything an encoder is opened from, whatever its format: a Hugging Face directory
// (config.json, model.safetensors, tokenizer.json, sentence-transformers' modules.json) or a GGUF
// file (gguf_encoder.ts turns its metadata and names into the same). The loader, the tokenizer and
// the pooling all read this, so neither format has code paths past opening.

import { join } from "node:path";
import { isGgufFile, readGguf } from "../formats/gguf.ts";
import { type PoolingConfig, readPoolingConfig } from "../formats/pooling_config.ts";
import {
  readSafetensorsContents,
  type TensorInfo,
  type UnsupportedTensor,
} from "../formats/safetensors.ts";
import { ModelLoadError } from "../model/errors.ts";
import { type EncoderConfig, isEncoderConfig, parseEncoderConfig } from "./config.ts";
import { ggufEncoder, isGgufEncoder } from "./gguf_encoder.ts";
import { readJson as readModelJson } from "../formats/hf_dir.ts";

export interface EncoderSource {
  /** The directory or GGUF file. */
  path: string;
  config: EncoderConfig;
  /** The file that holds the weights (named in errors). */
  weightsFile: string;
  tensors: Map<string, TensorInfo>;
  unsupported: Map<string, UnsupportedTensor>;
  /** The pooling the files declare, or null (none declared). */
  pooling: PoolingConfig | null;
  tokenizerJson: unknown;
  tokenizerConfig: Record<string, unknown>;
}

/** Whether `path` is an encoder directory or GGUF file (false when it is neither). */
export async function isEncoderPath(path: string): Promise<boolean> {
  if (await isFile(path)) return await isGgufFile(path) && isGgufEncoder(await readGguf(path));
  try {
    const json = JSON.parse(await Deno.readTextFile(join(path, "config.json")));
    return typeof json === "object" && json !== null && isEncoderConfig(json);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) return false;
    if (e instanceof SyntaxError) return false;
    throw e;
  }
}

export async function openEncoderSource(path: string): Promise<EncoderSource> {
  if (await isFile(path)) {
    const g = ggufEncoder(await readGguf(path));
    return {
      path,
      config: parseEncoderConfig(g.configJson, path),
      weightsFile: path,
      tensors: g.tensors,
      unsupported: new Map(),
      pooling: g.pooling,
      tokenizerJson: g.tokenizerJson,
      tokenizerConfig: {},
    };
  }
  const configPath = join(path, "config.json");
  const config = parseEncoderConfig(await readJson(configPath), configPath);
  const weightsFile = join(path, "model.safetensors");
  let contents;
  try {
    contents = await readSafetensorsContents(weightsFile);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw new ModelLoadError(
        weightsFile,
        "missing (an encoder directory needs model.safetensors)",
      );
    }
    throw e;
  }
  const tokenizerPath = join(path, "tokenizer.json");
  let tokenizerConfig: Record<string, unknown> = {};
  try {
    tokenizerConfig = await readJson(join(path, "tokenizer_config.json"));
  } catch (e) {
    if (!(e instanceof ModelLoadError && e.problem === "missing")) throw e;
  }
  return {
    path,
    config,
    weightsFile,
    tensors: contents.tensors,
    unsupported: contents.unsupported,
    pooling: await readPoolingConfig(path),
    tokenizerJson: await readJson(tokenizerPath),
    tokenizerConfig,
  };
}

/** A JSON file of the model as an object (hf_dir.ts reads and names the failures). */
async function readJson(path: string): Promise<Record<string, unknown>> {
  return await readModelJson(path) as Record<string, unknown>;
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}
