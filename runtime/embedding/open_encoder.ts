// Where the server's model loader sends an encoder: `isEncoderModel` says whether a path is a
// directory whose config.json names a BERT-family encoder (BertModel, XLMRobertaModel,
// NomicBertModel, or a SequenceClassification head on the first two) or a GGUF file of llama.cpp's
// "bert" or "nomic-bert" architecture; `openEncoderModel` opens it as an embedder or, with a
// classification head, a reranker. The one file the server needs from this folder.

import {
  EncoderModel,
  EncoderTokenizer,
  isEncoderPath,
  openEncoderSource,
} from "../../engine/encoder/encoder.ts";
import type { Gpu } from "../../engine/gpu/device.ts";
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
  & (
    | { kind: "embedding"; embedder: Embedder; reranker?: undefined }
    | { kind: "reranker"; reranker: Reranker; embedder?: undefined }
  )
  & {
    /** Bytes its weights and buffers hold on the device (the router's budget). */
    deviceBytes: number;
  };

/** Whether `path` (a directory or a GGUF file) is an encoder this engine runs; false if neither. */
export function isEncoderModel(path: string): Promise<boolean> {
  return isEncoderPath(path);
}

/** Opens the encoder at `path`: a reranker if it has a classification head, else an embedder. */
export async function openEncoderModel(
  path: string,
  options: OpenEncoderOptions = {},
): Promise<OpenEncoder> {
  const source = await openEncoderSource(path);
  const tokenizer = EncoderTokenizer.fromSource(source);
  const pooling = source.pooling;
  const model = await EncoderModel.fromSource(source, options);
  try {
    if (tokenizer.vocabSize > model.config.vocabSize) {
      throw new Error(
        `${path}: the tokenizer has ${tokenizer.vocabSize} ids, the model ${model.config.vocabSize}`,
      );
    }
    const deviceBytes = model.deviceMemory().bytes;
    if (model.config.classifier) {
      return { kind: "reranker", reranker: new EncoderReranker(model, tokenizer), deviceBytes };
    }
    return {
      kind: "embedding",
      embedder: new EncoderEmbedder(model, tokenizer, pooling?.mode ?? "mean"),
      deviceBytes,
    };
  } catch (e) {
    model.close();
    throw e;
  }
}
