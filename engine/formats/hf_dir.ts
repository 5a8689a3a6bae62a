// Opens a Hugging Face model directory and checks, before any weight is read, that it holds a
// Llama checkpoint the engine can run: config, tokenizer files, and every expected tensor with
// the right shape and a loadable dtype (single file or sharded with an index).

import { join } from "node:path";
import { type LlamaConfig, parseLlamaConfig } from "../model/config.ts";
import { ModelLoadError } from "../model/errors.ts";
import { EMBED, type ExpectedTensor, expectedTensors, LM_HEAD } from "../model/tensors.ts";
import { pathExists } from "../util/path_exists.ts";
import type { ModelFiles } from "./model_files.ts";
import { splitFusedSafetensors } from "./fused_tensors.ts";
import {
  readSafetensorsContents,
  type TensorInfo,
  unsupportedDtypeProblem,
  type UnsupportedTensor,
} from "./safetensors.ts";

/** Opens the Hugging Face model directory `root` (an absolute path that is a directory). */
export async function openHfDir(root: string): Promise<ModelFiles> {
  const configPath = join(root, "config.json");
  const config = parseLlamaConfig(await readJson(configPath), configPath);
  const weights = await readWeights(root);
  languageModelTensors(weights.tensors);
  if (config.architecture === "phi3") splitFusedSafetensors(config, weights.tensors);
  checkTensors(config, weights);

  const tokenizerJson = await readJson(join(root, "tokenizer.json"));
  const tokenizerConfig = await readJsonObject(join(root, "tokenizer_config.json"));
  const generationPath = join(root, "generation_config.json");
  const generationConfig = await pathExists(generationPath)
    ? await readJsonObject(generationPath)
    : null;
  return {
    dir: root,
    config,
    tensors: weights.tensors,
    tokenizerJson,
    tokenizerConfig,
    generationConfig,
  };
}

/**
 * A multimodal checkpoint's language model (Gemma3ForConditionalGeneration) under the names of the
 * text model's: language_model.model.* (transformers before 4.52) or model.language_model.* (after)
 * become model.*, language_model.lm_head.* lm_head.*; the vision tower's tensors are left unread.
 */
function languageModelTensors(tensors: Map<string, TensorInfo>): void {
  if (tensors.has(EMBED)) return;
  for (const [name, info] of [...tensors]) {
    const m = /^(?:language_model\.model\.|model\.language_model\.)(.+)$/.exec(name) ??
      /^language_model\.(lm_head\..+)$/.exec(name);
    if (!m) continue;
    const renamed = m[1].startsWith("lm_head.") ? m[1] : `model.${m[1]}`;
    tensors.delete(name);
    tensors.set(renamed, { ...info, name: renamed });
  }
}

interface Weights {
  tensors: Map<string, TensorInfo>;
  unsupported: Map<string, UnsupportedTensor>;
  /** The file to blame for a tensor that is missing: the single file, or the index. */
  listing: string;
}

async function readWeights(root: string): Promise<Weights> {
  const single = join(root, "model.safetensors");
  if (await pathExists(single)) {
    const { tensors, unsupported } = await readSafetensorsContents(single);
    return { tensors, unsupported, listing: single };
  }
  const indexPath = join(root, "model.safetensors.index.json");
  if (!(await pathExists(indexPath))) {
    throw new ModelLoadError(
      single,
      "missing (a model directory needs model.safetensors or model.safetensors.index.json)",
    );
  }
  const weightMap = parseIndex(await readJson(indexPath), indexPath);

  const shards = new Map<string, Awaited<ReturnType<typeof readSafetensorsContents>>>();
  for (const shard of new Set(weightMap.values())) {
    const shardPath = join(root, shard);
    if (!(await pathExists(shardPath))) {
      throw new ModelLoadError(shardPath, `missing (named by ${indexPath})`);
    }
    shards.set(shard, await readSafetensorsContents(shardPath));
  }
  const tensors = new Map<string, TensorInfo>();
  const unsupported = new Map<string, UnsupportedTensor>();
  for (const [name, shard] of weightMap) {
    const contents = shards.get(shard)!;
    const info = contents.tensors.get(name);
    const other = contents.unsupported.get(name);
    if (info) tensors.set(name, info);
    else if (other) unsupported.set(name, other);
    else {
      throw new ModelLoadError(
        indexPath,
        `weight_map puts tensor "${name}" in ${shard}, but that shard does not contain it`,
      );
    }
  }
  return { tensors, unsupported, listing: indexPath };
}

function parseIndex(json: unknown, file: string): Map<string, string> {
  const weightMap = (json as { weight_map?: unknown } | null)?.weight_map;
  if (typeof weightMap !== "object" || weightMap === null || Array.isArray(weightMap)) {
    throw new ModelLoadError(file, `field "weight_map" must be an object of tensor → shard file`);
  }
  const out = new Map<string, string>();
  for (const [name, shard] of Object.entries(weightMap)) {
    // Shards are plain file names next to the index; anything else could escape the directory.
    if (
      typeof shard !== "string" || !/^[\w.-]+\.safetensors$/.test(shard) || shard.startsWith(".")
    ) {
      throw new ModelLoadError(
        file,
        `weight_map entry "${name}" names ${JSON.stringify(shard)}, not a .safetensors file name`,
      );
    }
    out.set(name, shard);
  }
  return out;
}

function checkTensors(cfg: LlamaConfig, weights: Weights): void {
  const check = (want: ExpectedTensor) => {
    const bad = weights.unsupported.get(want.name);
    if (bad) throw new ModelLoadError(bad.file, unsupportedDtypeProblem(bad));
    const info = weights.tensors.get(want.name);
    if (!info) {
      throw new ModelLoadError(weights.listing, `missing tensor "${want.name}"`);
    }
    if (info.shape.join(",") !== want.shape.join(",")) {
      throw new ModelLoadError(
        info.file,
        `tensor "${want.name}" has shape [${info.shape.join(", ")}], expected ` +
          `[${want.shape.join(", ")}] from config.json`,
      );
    }
  };
  for (const want of expectedTensors(cfg)) check(want);
  // A tied checkpoint may still ship lm_head.weight (a copy of the embeddings); if it does, it must
  // at least be well-formed, though the engine reads the embeddings instead.
  if (cfg.tieWordEmbeddings && (weights.tensors.has(LM_HEAD))) {
    check({ name: LM_HEAD, shape: [cfg.vocabSize, cfg.hiddenSize], role: "lmHead" });
  }
}

/** A model file's JSON, or a ModelLoadError ("missing", or not valid JSON) naming the file. */
export async function readJson(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) throw new ModelLoadError(path, "missing");
    throw e;
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ModelLoadError(path, `not valid JSON (${(e as Error).message})`);
  }
}

async function readJsonObject(path: string): Promise<Record<string, unknown>> {
  const json = await readJson(path);
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new ModelLoadError(path, "expected a JSON object");
  }
  return json as Record<string, unknown>;
}
