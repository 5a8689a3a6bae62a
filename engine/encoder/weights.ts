// Reads an encoder's weights (safetensors or GGUF byte ranges, by Hugging Face name) onto the
// device as W, checking each
// tensor's shape first; a weight of several tensors (fused qkv, SwiGLU's gate and up) is stacked on
// the host and uploaded as one buffer.

import type { Gpu } from "../gpu/device.ts";
import { uploadStorage } from "../gpu/buffers.ts";
import { createWeightTexture, writeTextureBytes } from "../gpu/weight_texture.ts";
import { matmulVectorShape } from "../gpu/kernels/matmul.ts";
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

/**
 * Where the matrices live: storage buffers, or weight textures holding the same bytes (on llvmpipe
 * texel fetches read them 6-13x faster than storage loads: weight_texture.ts). A matrix whose shape
 * the texture path cannot take (K % 8, N % 4) stays in a buffer either way.
 */
export type MatrixLayout = "storage" | "texture";

/** The layout for this adapter: textures on Mesa's software adapter, buffers elsewhere. */
export function defaultMatrixLayout(gpu: Gpu): MatrixLayout {
  return /llvmpipe|lavapipe/i.test(gpu.adapterName) ? "texture" : "storage";
}

/** Uploads every weight as W; a weight over the adapter's binding limit is refused by name. */
export async function uploadEncoderWeights(
  gpu: Gpu,
  file: string,
  weights: EncoderWeights<TensorInfo[]>,
  layout: MatrixLayout = "storage",
): Promise<EncoderWeights<GPUBuffer | GPUTexture>> {
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
  const matrices = new Set<TensorInfo[]>();
  for (const l of weights.layers) matrices.add(l.qkv).add(l.o).add(l.up).add(l.down);
  if (weights.headDense) matrices.add(weights.headDense);
  return mapWeights(weights, (parts): GPUBuffer | GPUTexture => {
    const views = parts.map((p) => bytes.get(p)!);
    let joined: ArrayBufferView = views[0];
    if (views.length > 1) {
      const all = new Uint8Array(views.reduce((a, v) => a + v.byteLength, 0));
      let at = 0;
      for (const v of views) {
        all.set(new Uint8Array(v.buffer, v.byteOffset, v.byteLength), at);
        at += v.byteLength;
      }
      joined = all;
    }
    const rows = parts.reduce((a, t) => a + t.shape[0], 0);
    const cols = parts[0].shape[1];
    if (layout === "texture" && matrices.has(parts) && matmulVectorShape(cols, rows)) {
      const texture = createWeightTexture(gpu, joined.byteLength);
      writeTextureBytes(gpu, texture, 0, joined);
      return texture;
    }
    return uploadStorage(gpu, joined);
  });
}
