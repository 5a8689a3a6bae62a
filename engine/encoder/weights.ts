// Reads an encoder's weights (safetensors or GGUF byte ranges, by Hugging Face name) onto the
// device as W, checking each
// tensor's shape first; a weight of several tensors (fused qkv, SwiGLU's gate and up) is stacked on
// the host and uploaded as one buffer.

import type { Gpu } from "../gpu/device.ts";
import { uploadStorage } from "../gpu/buffers.ts";
import { ModelLoadError } from "../model/errors.ts";
import { numElements, readTensorInto, type TensorInfo } from "../formats/safetensors.ts";
import type { EncoderSource } from "./source.ts";
import { basePrefix, type EncoderWeights, encoderWeightSpecs, mapWeights } from "./tensors.ts";
import { weightBytes } from "./upload.ts";

/** The weights' specs resolved against the source's tensors, each shape checked. */
export function resolveEncoderWeights(source: EncoderSource): EncoderWeights<TensorInfo[]> {
  const { config, tensors, unsupported, weightsFile: file } = source;
  const names = new Set(tensors.keys());
  const prefix = basePrefix(names);
  if (prefix === null) {
    throw new ModelLoadError(file, "has no embeddings.word_embeddings.weight (under any prefix)");
  }
  return mapWeights(encoderWeightSpecs(config, prefix), (spec) => {
    const parts = spec.names.map((name) => {
      const info = tensors.get(name);
      if (!info) {
        const other = unsupported.get(name);
        throw new ModelLoadError(file, other ? `${name} is ${other.dtype}` : `${name} is missing`);
      }
      return info;
    });
    const rows = parts.reduce((a, t) => a + t.shape[0], 0);
    const cols = parts[0].shape.slice(1);
    const shape = [rows, ...cols];
    if (
      shape.length !== spec.shape.length || shape.some((d, i) => d !== spec.shape[i]) ||
      parts.some((t) => t.shape.slice(1).join() !== cols.join())
    ) {
      throw new ModelLoadError(
        file,
        `${spec.names.join(" + ")} has shape [${
          parts.map((t) => t.shape.join(",")).join(" + ")
        }], expected [${spec.shape.join(",")}]`,
      );
    }
    return parts;
  });
}

/** Uploads every weight as W; a weight over the adapter's binding limit is refused by name. */
export async function uploadEncoderWeights(
  gpu: Gpu,
  file: string,
  weights: EncoderWeights<TensorInfo[]>,
): Promise<EncoderWeights<GPUBuffer>> {
  const wordBytes = numElements(weights.word.flatMap((t) => t.shape)) * (gpu.f16 ? 2 : 4);
  if (wordBytes > gpu.maxBinding) {
    throw new ModelLoadError(
      file,
      `the word embeddings (${wordBytes} bytes) exceed the adapter's binding limit (${gpu.maxBinding})`,
    );
  }
  // Read every tensor first (async), then upload (sync, keeping the structure).
  const bytes = new Map<TensorInfo, ArrayBufferView>();
  const all: TensorInfo[] = [];
  mapWeights(weights, (parts) => all.push(...parts));
  for (const info of all) {
    const raw = new Uint8Array(info.byteLength);
    await readTensorInto(info, raw);
    bytes.set(info, weightBytes(gpu, raw, info.dtype));
  }
  return mapWeights(weights, (parts) => {
    const views = parts.map((p) => bytes.get(p)!);
    if (views.length === 1) return uploadStorage(gpu, views[0]);
    const total = views.reduce((a, v) => a + v.byteLength, 0);
    const joined = new Uint8Array(total);
    let at = 0;
    for (const v of views) {
      joined.set(new Uint8Array(v.buffer, v.byteOffset, v.byteLength), at);
      at += v.byteLength;
    }
    return uploadStorage(gpu, joined);
  });
}
