// A tiny Qwen3 with Qwen3-Embedding's sentence-transformers files (modules.json, 1_Pooling: last
// token, then Normalize): what makes a decoder an embedding model (runtime/embedding/model_kind.ts).

import { join } from "node:path";
import { writeTinyModel } from "../../engine/sources/tiny_model.ts";

export const EMBEDDING_CONTEXT = 256;

export const EMBEDDING_SPEC = {
  architecture: "qwen3",
  hiddenSize: 64,
  intermediateSize: 136,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  tied: false,
  dtype: "F16",
  maxPositionEmbeddings: EMBEDDING_CONTEXT,
  seed: 23,
} as const;

/** Writes the model into `dir` (a new temporary directory when absent) and returns it. */
export async function writeTinyEmbeddingModel(dir?: string): Promise<string> {
  const at = dir ?? await Deno.makeTempDir({ prefix: "sluice-embed-" });
  await writeTinyModel(at, EMBEDDING_SPEC);
  await Deno.writeTextFile(
    join(at, "modules.json"),
    JSON.stringify([
      { idx: 0, name: "0", path: "", type: "sentence_transformers.models.Transformer" },
      { idx: 1, name: "1", path: "1_Pooling", type: "sentence_transformers.models.Pooling" },
      { idx: 2, name: "2", path: "2_Normalize", type: "sentence_transformers.models.Normalize" },
    ]),
  );
  await Deno.mkdir(join(at, "1_Pooling"));
  await Deno.writeTextFile(
    join(at, "1_Pooling", "config.json"),
    JSON.stringify({
      word_embedding_dimension: EMBEDDING_SPEC.hiddenSize,
      pooling_mode_lasttoken: true,
    }),
  );
  return at;
}
