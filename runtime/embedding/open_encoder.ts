// Where the server's model loader sends an encoder directory: `isEncoderModel` says whether
// config.json names a BERT-family encoder (BertModel, XLMRobertaModel, NomicBertModel, or a
// SequenceClassification head on the first two), `openEncoderModel` opens it as an embedder or,
// with a classification head, a reranker. The one file the server needs from this folder.

import { join } from "node:path";
import { EncoderModel, EncoderTokenizer, isEncoderConfig } from "../../engine/encoder/encoder.ts";
import type { Gpu } from "../../engine/gpu/device.ts";
import { readPoolingConfig } from "../../engine/formats/pooling_config.ts";
import type { Embedder, Reranker } from "./embedder.ts";
import { EncoderEmbedder, EncoderReranker } from "./encoder_model.ts";

export interface OpenEncoderOptions {
  /** A device to share (tests); absent: the model opens its own and destroys it on close. */
  gpu?: Gpu;
  /** With a device of its own: f32 weights even where the adapter has shader-f16. */
  forceF32?: boolean;
  /** Most tokens in one forward pass, all inputs together (default 4096). */
  maxBatchTokens?: number;
  /** Most inputs in one forward pass (default 256). */
  maxBatchInputs?: number;
}

export type OpenEncoder =
  | { kind: "embedding"; embedder: Embedder; reranker?: undefined }
  | { kind: "reranker"; reranker: Reranker; embedder?: undefined };

/** Whether `dir`'s config.json describes an encoder this engine runs (false if it has none). */
export async function isEncoderModel(dir: string): Promise<boolean> {
  try {
    const json = JSON.parse(await Deno.readTextFile(join(dir, "config.json")));
    return typeof json === "object" && json !== null && isEncoderConfig(json);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof SyntaxError) return false;
    throw e;
  }
}

/** Opens the encoder in `dir`: a reranker if it has a classification head, else an embedder. */
export async function openEncoderModel(
  dir: string,
  options: OpenEncoderOptions = {},
): Promise<OpenEncoder> {
  const tokenizer = await EncoderTokenizer.load(dir);
  const pooling = await readPoolingConfig(dir);
  const model = await EncoderModel.load(dir, options);
  try {
    if (tokenizer.vocabSize > model.config.vocabSize) {
      throw new Error(
        `${dir}: the tokenizer has ${tokenizer.vocabSize} ids, the model ${model.config.vocabSize}`,
      );
    }
    if (model.config.classifier) {
      return { kind: "reranker", reranker: new EncoderReranker(model, tokenizer) };
    }
    return {
      kind: "embedding",
      embedder: new EncoderEmbedder(model, tokenizer, pooling?.mode ?? "mean"),
    };
  } catch (e) {
    model.close();
    throw e;
  }
}
