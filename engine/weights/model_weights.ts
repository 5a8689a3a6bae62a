// A model's weights as the forward pass binds them: GPU buffers per layer, with QKV and gate/up
// fused, and every matrix split into row parts where it exceeds the adapter's binding limit.

import type { QuantType } from "../quant/formats.ts";

/** One row range of a W-typed matrix, in its own buffer. */
export interface BufferPart {
  buffer: GPUBuffer;
  texture?: undefined;
  /** First output row of the full matrix held by this part. */
  rowStart: number;
  rows: number;
  /** This part's own format, where a matrix's parts differ (GGUF tensors of different types). */
  format?: MatrixFormat;
}

/**
 * The same row range held in a weight texture instead (engine/gpu/weight_texture.ts): the same
 * bytes, read by texel fetches, where the adapter reads textures faster (--matmul-kernel).
 */
export interface TexturePart {
  texture: GPUTexture;
  buffer?: undefined;
  rowStart: number;
  rows: number;
  format?: MatrixFormat;
}

export type MatrixPart = BufferPart | TexturePart;

/**
 * How a matrix's parts store their values: absent means the adapter's weight dtype (f16 with
 * shader-f16, else f32); a QuantType means GGML blocks in engine/gpu/kernels/quant_layout.ts's layout.
 */
export type MatrixFormat = "f32" | "f16" | QuantType;

/** A W-typed [rows, cols] matrix (rows = outputs, HF Linear layout). */
export interface GpuMatrix {
  rows: number;
  cols: number;
  parts: MatrixPart[];
  /** The format of every part that names none of its own. */
  format?: MatrixFormat;
}

/**
 * Fused SwiGLU weight: each part holds gate rows [a, b) followed by up rows [a, b), so the glu
 * matmul finds both halves of an output in one buffer even when the matrix is split.
 */
export interface GluMatrix {
  intermediate: number;
  cols: number;
  parts: MatrixPart[];
  format?: MatrixFormat;
}

export interface LayerWeights {
  inputNorm: GPUBuffer;
  /** The norm before the MLP. */
  mlpNorm: GPUBuffer;
  /** Gemma 3: the norms of attention's and of the MLP's outputs (sandwichNorms). */
  attnOutNorm?: GPUBuffer;
  mlpOutNorm?: GPUBuffer;
  /** q, k, v projections stacked by rows: [(Hq + 2 Hkv) * hd, hidden]. */
  qkv: GpuMatrix;
  /** Qwen2: the q, k and v biases concatenated, [(Hq + 2 Hkv) * hd]. */
  qkvBias?: GPUBuffer;
  /** Qwen3: the q norm's then the k norm's weights, [2, hd]. */
  qkNorm?: GPUBuffer;
  o: GpuMatrix;
  gateUp: GluMatrix;
  down: GpuMatrix;
}

export interface ModelWeights {
  embed: GpuMatrix;
  layers: LayerWeights[];
  finalNorm: GPUBuffer;
  /** The same object as `embed` when embeddings are tied. */
  lmHead: GpuMatrix;
  bytes: number;
}

/** Frees every matrix part and norm of `w` once (a tied LM head is the embedding's parts). */
export function destroyWeights(w: ModelWeights): void {
  const seen = new Set<GPUBuffer | GPUTexture>();
  const drop = (b: GPUBuffer | GPUTexture) => {
    if (!seen.has(b)) seen.add(b), b.destroy();
  };
  const parts = (m: { parts: MatrixPart[] }) => m.parts.forEach((p) => drop(p.buffer ?? p.texture));
  parts(w.embed);
  parts(w.lmHead);
  drop(w.finalNorm);
  for (const l of w.layers) {
    drop(l.inputNorm);
    drop(l.mlpNorm);
    if (l.attnOutNorm) drop(l.attnOutNorm);
    if (l.mlpOutNorm) drop(l.mlpOutNorm);
    if (l.qkNorm) drop(l.qkNorm);
    if (l.qkvBias) drop(l.qkvBias);
    parts(l.qkv);
    parts(l.o);
    parts(l.gateUp);
    parts(l.down);
  }
}
