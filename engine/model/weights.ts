// Streams checkpoint tensors from safetensors files into GPU buffers, converting to the weight
// dtype (f16 where the adapter has it, else f32) and fusing QKV and gate/up on the way.
//
// Only one chunk of one tensor is on the host at a time, so the model is never held twice.
// Matrices whose size exceeds the adapter's binding limit are split into row parts. Each chunk is
// checked for NaN and Inf as it passes (finite_check.ts): a bad checkpoint fails the load.

import type { Gpu } from "../gpu/device.ts";
import { writeBytes } from "../gpu/buffers.ts";
import { bf16BitsToF32, f16BitsToF32, f32ToF16Bits } from "../quant/half.ts";
import { ModelLoadError } from "./errors.ts";
import { firstNonFinite } from "../formats/finite_check.ts";
import { loadGgufWeights } from "./gguf_weights.ts";
import type { ModelFiles } from "../formats/model_files.ts";
import { readTensorInto, type TensorInfo } from "../formats/safetensors.ts";
import { type LoadProgress, WEIGHT_CHUNK_BYTES, WeightUpload } from "./weight_upload.ts";
import type { QuantType } from "../quant/formats.ts";

/** One row range of a W-typed matrix, in its own buffer. */
export interface MatrixPart {
  buffer: GPUBuffer;
  /** First output row of the full matrix held by this part. */
  rowStart: number;
  rows: number;
}

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
  postAttentionNorm: GPUBuffer;
  /** q, k, v projections stacked by rows: [(Hq + 2 Hkv) * hd, hidden]. */
  qkv: GpuMatrix;
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

export type { LoadProgress };

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

export async function loadWeights(
  gpu: Gpu,
  files: ModelFiles,
  onProgress?: LoadProgress,
): Promise<ModelWeights> {
  if (files.gguf) return loadGgufWeights(gpu, files, onProgress);
  const cfg = files.config;
  const tensor = (name: string): TensorInfo => {
    const t = files.tensors.get(name);
    if (!t) throw new Error(`tensor ${name} missing from ${files.dir}`);
    return t;
  };
  const needed = [...files.tensors.values()].filter((t) =>
    t.name !== "lm_head.weight" || !cfg.tieWordEmbeddings
  );
  const totalBytes = needed.reduce((sum, t) => sum + t.byteLength, 0);
  const writer = new WeightWriter(gpu, totalBytes, onProgress);

  const embed = await writer.matrix([tensor("model.embed_tokens.weight")]);
  const layers: LayerWeights[] = [];
  for (let i = 0; i < cfg.numLayers; i++) {
    const p = `model.layers.${i}.`;
    layers.push({
      inputNorm: await writer.vector(tensor(p + "input_layernorm.weight")),
      postAttentionNorm: await writer.vector(tensor(p + "post_attention_layernorm.weight")),
      qkv: await writer.matrix([
        tensor(p + "self_attn.q_proj.weight"),
        tensor(p + "self_attn.k_proj.weight"),
        tensor(p + "self_attn.v_proj.weight"),
      ]),
      o: await writer.matrix([tensor(p + "self_attn.o_proj.weight")]),
      gateUp: await writer.glu(
        tensor(p + "mlp.gate_proj.weight"),
        tensor(p + "mlp.up_proj.weight"),
      ),
      down: await writer.matrix([tensor(p + "mlp.down_proj.weight")]),
    });
  }
  const finalNorm = await writer.vector(tensor("model.norm.weight"));
  const lmHead = cfg.tieWordEmbeddings ? embed : await writer.matrix([tensor("lm_head.weight")]);
  return { embed, layers, finalNorm, lmHead, bytes: writer.gpuBytes };
}

/** Reads tensors in bounded chunks, converts them, and writes them into GPU buffers. */
class WeightWriter extends WeightUpload {
  async vector(t: TensorInfo): Promise<GPUBuffer> {
    const buffer = this.allocate(t.shape[0] * this.elemBytes, t.name);
    await this.copyRows(t, 0, 1, buffer, 0);
    return buffer;
  }

  /** Stacks the tensors by rows into one matrix (split into parts by the binding limit). */
  async matrix(tensors: TensorInfo[]): Promise<GpuMatrix> {
    const cols = tensors[0].shape[1];
    const rows = tensors.reduce((sum, t) => sum + t.shape[0], 0);
    const perPart = rowsPerPart(this.gpu, cols);
    const parts: MatrixPart[] = [];
    for (let rowStart = 0; rowStart < rows; rowStart += perPart) {
      const n = Math.min(perPart, rows - rowStart);
      parts.push({
        buffer: this.allocate(n * cols * this.elemBytes, tensors[0].name),
        rowStart,
        rows: n,
      });
    }
    let globalRow = 0;
    for (const t of tensors) {
      for (let r = 0; r < t.shape[0];) {
        const part = parts.find((p) => globalRow >= p.rowStart && globalRow < p.rowStart + p.rows)!;
        const n = Math.min(t.shape[0] - r, part.rowStart + part.rows - globalRow);
        await this.copyRows(
          t,
          r,
          n,
          part.buffer,
          (globalRow - part.rowStart) * cols * this.elemBytes,
        );
        r += n;
        globalRow += n;
      }
    }
    return { rows, cols, parts };
  }

  async glu(gate: TensorInfo, up: TensorInfo): Promise<GluMatrix> {
    const [intermediate, cols] = gate.shape;
    const perPart = rowsPerPart(this.gpu, cols, 2);
    const parts: MatrixPart[] = [];
    for (let rowStart = 0; rowStart < intermediate; rowStart += perPart) {
      const n = Math.min(perPart, intermediate - rowStart);
      const buffer = this.allocate(2 * n * cols * this.elemBytes, gate.name);
      await this.copyRows(gate, rowStart, n, buffer, 0);
      await this.copyRows(up, rowStart, n, buffer, n * cols * this.elemBytes);
      parts.push({ buffer, rowStart, rows: n });
    }
    return { intermediate, cols, parts };
  }

  /** Copies rows [row0, row0 + rows) of `t` (a vector counts as one row) to `dst` at `dstOffset`. */
  private async copyRows(
    t: TensorInfo,
    row0: number,
    rows: number,
    dst: GPUBuffer,
    dstOffset: number,
  ) {
    const cols = t.shape.length === 1 ? t.shape[0] : t.shape[1];
    const srcElem = t.dtype === "F32" ? 4 : 2;
    const rowsPerChunk = Math.max(1, Math.floor(WEIGHT_CHUNK_BYTES / (cols * srcElem)));
    for (let r = 0; r < rows; r += rowsPerChunk) {
      const n = Math.min(rowsPerChunk, rows - r);
      const raw = new Uint8Array(n * cols * srcElem);
      await readTensorInto({
        ...t,
        dataOffset: t.dataOffset + (row0 + r) * cols * srcElem,
        byteLength: raw.byteLength,
      }, raw);
      const bad = firstNonFinite(raw, t.dtype);
      if (bad >= 0) {
        throw new ModelLoadError(
          t.file,
          `tensor "${t.name}" holds NaN or Inf (element ${(row0 + r) * cols + bad} of ` +
            `[${t.shape.join(", ")}]); the checkpoint is corrupt or was converted badly`,
        );
      }
      const converted = convert(raw, t.dtype, this.gpu.f16);
      const offset = dstOffset + r * cols * this.elemBytes;
      // WebGPU writes need 4-byte alignment; an odd f16 row length only works for whole vectors.
      if (offset % 4 !== 0) {
        throw new Error(`${t.name}: f16 storage needs an even number of columns (has ${cols})`);
      }
      writeBytes(this.gpu, dst, offset, converted);
      this.read(raw.byteLength);
    }
  }
}

/** Converts raw little-endian tensor bytes to the GPU storage dtype. */
export function convert(
  raw: Uint8Array,
  dtype: TensorInfo["dtype"],
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
