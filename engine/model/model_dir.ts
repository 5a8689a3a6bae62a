// Opens a Hugging Face model directory and checks, before any weight is read, that it holds a
// Llama checkpoint the engine can run: config, tokenizer files, and every expected tensor with
// the right shape and a loadable dtype (single file or sharded with an index).

import { join, resolve } from "node:path";
import { type LlamaConfig, parseLlamaConfig } from "./config.ts";
import { ModelLoadError } from "./errors.ts";
import { pathExists } from "../util/path_exists.ts";
import { type GgufFile, isGgufFile } from "./gguf.ts";
import { openGgufModel } from "./gguf_model.ts";
import {
  readSafetensorsContents,
  type TensorInfo,
  unsupportedDtypeProblem,
  type UnsupportedTensor,
} from "./safetensors.ts";

export interface ModelFiles {
  /** Absolute path of the directory (of the file, for a GGUF model). */
  dir: string;
  config: LlamaConfig;
  /** Every loadable tensor of the checkpoint by name, across shards. */
  tensors: Map<string, TensorInfo>;
  tokenizerJson: unknown;
  tokenizerConfig: Record<string, unknown>;
  generationConfig: Record<string, unknown> | null;
  /** A GGUF model's file: its weights load from here (`tensors` is then empty). */
  gguf?: GgufFile;
}

export interface ExpectedTensor {
  name: string;
  shape: number[];
}

/** The tensors a Llama forward pass reads, with Hugging Face names and [out, in] shapes. */
export function expectedTensors(cfg: LlamaConfig): ExpectedTensor[] {
  const h = cfg.hiddenSize;
  const qDim = cfg.numHeads * cfg.headDim;
  const kvDim = cfg.numKvHeads * cfg.headDim;
  const out: ExpectedTensor[] = [{ name: "model.embed_tokens.weight", shape: [cfg.vocabSize, h] }];
  for (let i = 0; i < cfg.numLayers; i++) {
    const p = `model.layers.${i}`;
    out.push(
      { name: `${p}.input_layernorm.weight`, shape: [h] },
      { name: `${p}.self_attn.q_proj.weight`, shape: [qDim, h] },
      { name: `${p}.self_attn.k_proj.weight`, shape: [kvDim, h] },
      { name: `${p}.self_attn.v_proj.weight`, shape: [kvDim, h] },
      { name: `${p}.self_attn.o_proj.weight`, shape: [h, qDim] },
      { name: `${p}.post_attention_layernorm.weight`, shape: [h] },
      { name: `${p}.mlp.gate_proj.weight`, shape: [cfg.intermediateSize, h] },
      { name: `${p}.mlp.up_proj.weight`, shape: [cfg.intermediateSize, h] },
      { name: `${p}.mlp.down_proj.weight`, shape: [h, cfg.intermediateSize] },
    );
  }
  out.push({ name: "model.norm.weight", shape: [h] });
  if (!cfg.tieWordEmbeddings) out.push({ name: "lm_head.weight", shape: [cfg.vocabSize, h] });
  return out;
}

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

  const configPath = join(root, "config.json");
  const config = parseLlamaConfig(await readJson(configPath), configPath);
  const weights = await readWeights(root);
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
  if (cfg.tieWordEmbeddings && (weights.tensors.has("lm_head.weight"))) {
    check({ name: "lm_head.weight", shape: [cfg.vocabSize, cfg.hiddenSize] });
  }
}

async function readJson(path: string): Promise<unknown> {
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
