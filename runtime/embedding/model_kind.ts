// Whether a decoder model directory generates (chat), embeds or reranks. Embedding and reranking
// decoders are ordinary causal LMs by architecture (Qwen3-Embedding and Qwen3-Reranker are both
// Qwen3ForCausalLM), so the kind comes from what the checkpoint declares around its weights, in
// this order:
//
//   1. a sentence-transformers Pooling module (modules.json → 1_Pooling/config.json): embedding;
//   2. config.json's `architectures` naming one (a name containing Rerank or Ranking, or
//      Embedding);
//   3. the model card's front matter (README.md): Hugging Face's `pipeline_tag` is
//      `text-ranking` for Qwen3-Reranker, `feature-extraction` or `sentence-similarity` for
//      embedding models;
//   4. last resort, documented because a renamed copy defeats it: the directory's (or GGUF
//      file's) name containing "Reranker" or "Embedding".
//
// Anything else is a chat model.

import { basename, join } from "node:path";
import type { ModelKind } from "./embedder.ts";
import { readPoolingConfig } from "../../engine/formats/pooling_config.ts";

/** The kind of the decoder model at `dir` (a model directory, or a GGUF file's path). */
export async function decoderModelKind(dir: string): Promise<ModelKind> {
  const isDir = (await Deno.stat(dir)).isDirectory;
  if (isDir) {
    if (await readPoolingConfig(dir) !== null) return "embedding";
    const config = await readText(join(dir, "config.json"));
    const architectures: unknown = config ? JSON.parse(config).architectures : undefined;
    for (const name of Array.isArray(architectures) ? architectures : []) {
      if (typeof name !== "string") continue;
      if (/Reranker|Rerank|Ranking/i.test(name)) return "reranker";
      if (/Embedding/i.test(name)) return "embedding";
    }
    const tag = pipelineTag(await readText(join(dir, "README.md")));
    if (tag === "text-ranking") return "reranker";
    if (tag === "feature-extraction" || tag === "sentence-similarity") return "embedding";
  }
  const name = basename(dir);
  if (/reranker/i.test(name)) return "reranker";
  if (/embedding/i.test(name)) return "embedding";
  return "chat";
}

/** The `pipeline_tag` of a model card's YAML front matter, or null. */
export function pipelineTag(readme: string | null): string | null {
  const front = readme?.match(/^---\r?\n([\s\S]*?)\r?\n---/);
  const tag = front?.[1].match(/^pipeline_tag:\s*["']?([\w-]+)["']?\s*$/m);
  return tag ? tag[1] : null;
}

async function readText(path: string): Promise<string | null> {
  try {
    return await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}
