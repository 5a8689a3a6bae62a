// What every weight uploader (safetensors, GGUF) shares while it streams tensors to the GPU: the
// buffers it allocates and their bytes, the host bytes read so far for the progress bar, the
// bounded host chunk that keeps a model from being held twice, and how a matrix is cut into row
// parts that each fit the adapter's binding limit (or, for weights held in textures, one texture).

import type { Gpu } from "../gpu/device.ts";
import { createStorage, writeBytes } from "../gpu/buffers.ts";
import type { StDtype } from "../formats/safetensors.ts";
import { bf16BitsToF32, f16BitsToF32, f32ToF16Bits } from "../quant/half.ts";
import {
  createWeightTexture,
  maxTexels,
  texelsOf,
  type WeightLayout,
  writeTextureBytes,
} from "../gpu/weight_texture.ts";
import { matmulVectorShape } from "../gpu/kernels/matmul.ts";
import type { BufferPart, GluMatrix, GpuMatrix, TexturePart } from "./model_weights.ts";

export type LoadProgress = (loadedBytes: number, totalBytes: number) => void;

/** Host chunk size: large enough for few reads, small enough to stay off the memory budget. */
export const WEIGHT_CHUNK_BYTES = 16 << 20;

/** A format's uploader: tensors by their Hugging Face names into the forward pass's buffers. */
export abstract class WeightUpload {
  /** Bytes of GPU buffers allocated for weights. */
  gpuBytes = 0;
  /** Bytes per element of the GPU's float weight dtype. */
  protected readonly elemBytes: number;
  private loaded = 0;

  constructor(
    protected readonly gpu: Gpu,
    private readonly totalBytes: number,
    private readonly onProgress?: LoadProgress,
    /** Where float matrices go: storage buffers, or textures where their shape allows. */
    protected readonly floatLayout: WeightLayout = "storage",
  ) {
    this.elemBytes = gpu.f16 ? 2 : 4;
  }

  /**
   * A vector (a norm's weights, a bias) in the GPU's float dtype; several names are concatenated
   * (q, k, v biases make the qkv bias, the q and k norms one [2, headDim] buffer). `add` is added
   * to every value (Gemma's norms: 1 + w, where the checkpoint stores w).
   */
  abstract vector(names: string[], add?: number): Promise<GPUBuffer>;
  /** The tensors stacked by rows into one matrix (q, k, v make qkv), split into parts. */
  abstract matrix(names: string[]): Promise<GpuMatrix>;
  /** Gate and up fused into one SwiGLU matrix (GluMatrix). */
  abstract glu(gate: string, up: string): Promise<GluMatrix>;

  protected allocate(bytes: number, label: string): GPUBuffer {
    this.gpuBytes += bytes;
    return createStorage(this.gpu, bytes, label);
  }

  /** Buffers for `rows` rows cut into parts of `perPart` rows, a part of n rows taking bytes(n). */
  protected allocateParts(
    rows: number,
    perPart: number,
    bytes: (rows: number) => number,
    label: string,
  ): BufferPart[] {
    const parts: BufferPart[] = [];
    for (let rowStart = 0; rowStart < rows; rowStart += perPart) {
      const n = Math.min(perPart, rows - rowStart);
      parts.push({ buffer: this.allocate(bytes(n), label), rowStart, rows: n });
    }
    return parts;
  }

  /**
   * Whether a float matrix of `rows` outputs × `cols` goes into textures: asked for, and a shape
   * whose every part the texture matmul can read (its vector path).
   */
  protected floatTextures(rows: number, cols: number, rowsPerUnit = 1): boolean {
    return this.floatLayout === "texture" && matmulVectorShape(cols, rows) &&
      textureRowsPerPart(this.gpu, cols, rowsPerUnit) % 4 === 0;
  }

  /** allocateParts for a float matrix held in weight textures. */
  protected allocateTextureParts(
    rows: number,
    perPart: number,
    bytes: (rows: number) => number,
    label: string,
  ): TexturePart[] {
    const parts: TexturePart[] = [];
    for (let rowStart = 0; rowStart < rows; rowStart += perPart) {
      const n = Math.min(perPart, rows - rowStart);
      this.gpuBytes += texelsOf(bytes(n)) * 16;
      parts.push({ texture: createWeightTexture(this.gpu, bytes(n), label), rowStart, rows: n });
    }
    return parts;
  }

  /** queue.writeBuffer or writeTextureBytes, as the part is held. */
  protected writePart(dst: GPUBuffer | GPUTexture, offset: number, data: ArrayBufferView): void {
    if (dst instanceof GPUTexture) writeTextureBytes(this.gpu, dst, offset, data);
    else writeBytes(this.gpu, dst, offset, data);
  }

  /** Counts `bytes` of the checkpoint read from disk, and reports progress. */
  protected read(bytes: number): void {
    this.loaded += bytes;
    this.onProgress?.(this.loaded, this.totalBytes);
  }
}

/** Where rows [first, first + rows) of a matrix fall: each part's share, in order. */
export function partShares<P extends { rowStart: number; rows: number }>(
  parts: P[],
  first: number,
  rows: number,
): { part: P; partRow: number; from: number; rows: number }[] {
  const shares = [];
  for (let done = 0; done < rows;) {
    const global = first + done;
    const part = parts.find((p) => global >= p.rowStart && global < p.rowStart + p.rows)!;
    const take = Math.min(rows - done, part.rowStart + part.rows - global);
    shares.push({ part, partRow: global - part.rowStart, from: done, rows: take });
    done += take;
  }
  return shares;
}

/** Rows per part so that no buffer exceeds the binding limit. */
export function rowsPerPart(gpu: Gpu, cols: number, rowsPerUnit = 1): number {
  const bytesPerRow = cols * (gpu.f16 ? 2 : 4) * rowsPerUnit;
  const limit = Math.min(gpu.maxBinding, gpu.maxBufferSize);
  const rows = Math.floor(limit / bytesPerRow);
  if (rows < 1) {
    throw new Error(`a single row of ${cols} columns exceeds the adapter's binding limit`);
  }
  // Parts start on multiples of 192 rows so every part keeps the matmul's vectorized path
  // (it needs output offsets that are multiples of 4).
  return rows >= 192 ? rows - (rows % 192) : rows;
}

/**
 * Rows per texture part (cf. rowsPerPart): as many as one weight texture holds, at multiples of
 * 192 rows like the storage parts.
 */
export function textureRowsPerPart(gpu: Gpu, cols: number, rowsPerUnit = 1): number {
  const rows = Math.floor(maxTexels(gpu) / (texelsOf(cols * (gpu.f16 ? 2 : 4)) * rowsPerUnit));
  if (rows < 1) throw new Error(`a row of ${cols} columns exceeds one weight texture`);
  return rows >= 192 ? rows - (rows % 192) : rows;
}

/** convert(), with `add` added to every value first (exact in f32; the f16 rounding after). */
export function convertAdding(
  raw: Uint8Array,
  dtype: StDtype,
  toF16: boolean,
  add: number,
): Uint16Array | Float32Array {
  if (add === 0) return convert(raw, dtype, toF16);
  const values = Float32Array.from(convert(raw, dtype, false), (v) => v + add);
  if (!toF16) return values;
  return Uint16Array.from(values, (v) => f32ToF16Bits(v));
}

/** Converts raw little-endian float tensor bytes to the GPU storage dtype. */
export function convert(
  raw: Uint8Array,
  dtype: StDtype,
  toF16: boolean,
): Uint16Array | Float32Array {
  if (dtype === "F16" && toF16) {
    return new Uint16Array(raw.buffer, raw.byteOffset, raw.byteLength / 2);
  }
  if (dtype === "F32" && !toF16) {
    return new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);
  }
  const n = raw.byteLength / (dtype === "F32" ? 4 : 2);
  const src = dtype === "F32"
    ? new Float32Array(raw.buffer, raw.byteOffset, n)
    : new Uint16Array(raw.buffer, raw.byteOffset, n);
  const decode = dtype === "F32"
    ? (x: number) => x
    : dtype === "F16"
    ? f16BitsToF32
    : bf16BitsToF32;
  if (toF16) {
    const out = new Uint16Array(n);
    for (let i = 0; i < n; i++) out[i] = f32ToF16Bits(decode(src[i]));
    return out;
  }
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = decode(src[i]);
  return out;
}
