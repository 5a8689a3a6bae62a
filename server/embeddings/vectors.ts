// What the embeddings endpoints do to a model's vectors on the way out: `dimensions` (a prefix of a
// Matryoshka-trained vector, renormalised; any other model only takes its own size) and OpenAI's
// base64 encoding (the float32 values' little-endian bytes, which its client decodes by default).

import type { Embedder } from "../../runtime/model_router.ts";
import { ApiError } from "../openai/errors.ts";

/** The vectors cut to `dimensions` (renormalised), or a 400 where the model cannot be cut. */
export function withDimensions(
  embedder: Embedder,
  vectors: Float32Array[],
  dimensions: number | null | undefined,
): Float32Array[] {
  if (dimensions == null || dimensions === embedder.dimensions) return vectors;
  if (!embedder.matryoshka) {
    throw new ApiError(
      400,
      `This model's vectors have ${embedder.dimensions} dimensions and cannot be shortened ` +
        "(it is not Matryoshka-trained)",
      "dimensions",
      "invalid_value",
    );
  }
  if (dimensions > embedder.dimensions) {
    throw new ApiError(
      400,
      `'dimensions' is at most ${embedder.dimensions} for this model`,
      "dimensions",
      "invalid_value",
    );
  }
  return vectors.map((v) => normalised(v.subarray(0, dimensions)));
}

function normalised(v: Float32Array): Float32Array {
  let sum = 0;
  for (const x of v) sum += x * x;
  const inv = sum > 0 ? 1 / Math.sqrt(sum) : 0;
  return v.map((x) => x * inv);
}

/** A vector as OpenAI's base64: its float32 values, little-endian. */
export function base64Of(v: Float32Array): string {
  const bytes = new Uint8Array(v.length * 4);
  const view = new DataView(bytes.buffer);
  v.forEach((x, i) => view.setFloat32(i * 4, x, true));
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}
