// Streams a GGUF model's tensors into GPU buffers, chunk by chunk as safetensors_upload.ts does
// for safetensors: float tensors (F32, F16, BF16) become the GPU's weight dtype, quantized ones
// (every type of quant/formats.ts) stay quantized, repacked by quant_layout.ts for the dequantizing
// kernels. Either way NaN and Inf fail the load: float values as they pass, quantized blocks by
// their scales (quant/block_scales.ts).
// The rows of attn_q and attn_k are put back in Hugging Face's order on the way
// (formats/rope_permutation.ts).
//
// Fused matrices whose tensors differ in type keep each type: Q4_K_M files give attn_v Q6_K in
// some layers (and Q8_0 beside Q5_0 q and k where rows are not whole 256-value blocks), so such a
// qkv matrix becomes one row part per tensor, each in its own format, run by its own kernel.
// gate/up is the exception: the SwiGLU kernel reads an output's gate and up rows from one part in
// one format, so a gate/up pair of two types (which llama.cpp's recipes give only in a few IQ
// mixes) is dequantized to the GPU's float dtype instead.

import type { Gpu } from "../gpu/device.ts";
import { writeBytes } from "../gpu/buffers.ts";
import { quantLayout, quantRowsPerPart, writeQuantRows } from "../gpu/kernels/quant_layout.ts";
import { ModelLoadError } from "../model/errors.ts";
import type { LlamaConfig } from "../model/config.ts";
import { firstNonFinite } from "../formats/finite_check.ts";
import { GGML_BLOCKS, type GgmlTypeName, type GgufFile, type GgufTensor } from "../formats/gguf.ts";
import { ggufTensorOf } from "../formats/gguf_model.ts";
import type { ModelFiles } from "../formats/model_files.ts";
import { permutedHeads, unpermuteRows } from "../formats/rope_permutation.ts";
import { readTensorInto } from "../formats/safetensors.ts";
import { dequantize, isQuantType, QUANT_FORMATS, type QuantType } from "../quant/formats.ts";
import { firstNonFiniteBlock } from "../quant/block_scales.ts";
import { f16BitsToF32, f32ToF16Bits } from "../quant/half.ts";
import type { BufferPart, GluMatrix, GpuMatrix } from "./model_weights.ts";
import {
  convert,
  type LoadProgress,
  partShares,
  rowsPerPart,
  WEIGHT_CHUNK_BYTES,
  WeightUpload,
} from "./upload.ts";

/** A source tensor of a matrix; `heads` when its rows carry llama.cpp's RoPE permutation. */
interface Source {
  t: GgufTensor;
  heads?: number;
}

/** How a matrix is stored: one quantized type, or the GPU's float dtype. */
type Storage = QuantType | "float";

export class GgufUpload extends WeightUpload {
  private readonly gguf: GgufFile;
  private readonly cfg: LlamaConfig;

  constructor(gpu: Gpu, files: ModelFiles, onProgress?: LoadProgress) {
    const gguf = files.gguf!;
    const needed = [...gguf.tensors.values()].filter((t) =>
      t.supported && !/^rope_(freqs|factors_long|factors_short)\.weight$/.test(t.name)
    );
    super(gpu, needed.reduce((s, t) => s + t.byteLength, 0), onProgress);
    this.gguf = gguf;
    this.cfg = files.config;
  }

  async vector(names: string[], add = 0): Promise<GPUBuffer> {
    const tensors = names.map((name) => ggufTensorOf(this.gguf, name, this.cfg));
    const length = tensors.reduce((sum, t) => sum + t.dims[0], 0);
    const buffer = this.allocate(length * this.elemBytes, tensors[0].name);
    let offset = 0;
    for (const t of tensors) {
      await this.stream({ t }, "float", (_row0, _rows, data) => {
        if (add !== 0) data = addTo(data as Float32Array | Uint16Array, add);
        writeBytes(this.gpu, buffer, offset, data as ArrayBufferView);
      });
      offset += t.dims[0] * this.elemBytes;
    }
    return buffer;
  }

  async matrix(names: string[]): Promise<GpuMatrix> {
    const sources: Source[] = names.map((name) => {
      const t = ggufTensorOf(this.gguf, name, this.cfg);
      return { t, heads: permutedHeads(this.cfg, t.name) };
    });
    const cols = sources[0].t.dims[0];
    const rows = sources.reduce((sum, s) => sum + s.t.dims[1], 0);
    // Consecutive tensors of one storage share parts; each further storage starts its own.
    const runs: { storage: Storage; sources: Source[] }[] = [];
    for (const source of sources) {
      const storage = storageOf([source.t]), last = runs.at(-1);
      if (last?.storage === storage) last.sources.push(source);
      else runs.push({ storage, sources: [source] });
    }
    const parts: BufferPart[] = [];
    let base = 0;
    for (const { storage, sources } of runs) {
      const runRows = sources.reduce((sum, s) => sum + s.t.dims[1], 0);
      const own = this.matrixParts(storage, runRows, cols, sources[0].t.name);
      let row = 0;
      for (const source of sources) {
        await this.streamRows(source, storage, own, row, cols);
        row += source.t.dims[1];
      }
      // Where storages differ, each part names its own format.
      const format = runs.length > 1 ? { format: this.formatOf(storage) } : {};
      for (const part of own) parts.push({ ...part, rowStart: base + part.rowStart, ...format });
      base += runRows;
    }
    return {
      rows,
      cols,
      parts,
      format: runs.length === 1 ? this.formatOf(runs[0].storage) : undefined,
    };
  }

  /** Buffers for a matrix of `rows` rows stored as `storage`, cut to fit the binding limit. */
  private matrixParts(storage: Storage, rows: number, cols: number, label: string): BufferPart[] {
    const perPart = storage === "float"
      ? rowsPerPart(this.gpu, cols)
      : quantRowsPerPart(this.gpu, storage, cols);
    return this.allocateParts(rows, perPart, (n) => this.partBytes(storage, n, cols), label);
  }

  /** Streams `source` as rows base.. of the matrix held by `parts`. */
  private async streamRows(
    source: Source,
    storage: Storage,
    parts: BufferPart[],
    base: number,
    cols: number,
  ): Promise<void> {
    await this.stream(source, storage, (row0, n, data) => {
      // A chunk may straddle parts: write each part its share.
      for (const { part, partRow, from, rows } of partShares(parts, base + row0, n)) {
        this.writeRows(storage, part.buffer, part.rows, cols, partRow, data, from, rows);
      }
    });
  }

  /** Gate rows [a, b) then up rows [a, b) in each part, one layout of 2(b - a) rows (GluMatrix). */
  async glu(gateName: string, upName: string): Promise<GluMatrix> {
    const gate = ggufTensorOf(this.gguf, gateName, this.cfg),
      up = ggufTensorOf(this.gguf, upName, this.cfg);
    const [cols, intermediate] = gate.dims;
    // One format for both halves (see the header): float where their types differ.
    const storage = storageOf([gate, up]);
    const perPart = storage === "float"
      ? rowsPerPart(this.gpu, cols, 2)
      : quantRowsPerPart(this.gpu, storage, cols, 2);
    const parts = this.allocateParts(
      intermediate,
      perPart,
      (n) => this.partBytes(storage, 2 * n, cols),
      gate.name,
    );
    for (const [which, t] of [gate, up].entries()) {
      await this.stream({ t }, storage, (row0, n, data) => {
        for (const { part, partRow, from, rows } of partShares(parts, row0, n)) {
          const row = which * part.rows + partRow;
          this.writeRows(storage, part.buffer, 2 * part.rows, cols, row, data, from, rows);
        }
      });
    }
    return { intermediate, cols, parts, format: this.formatOf(storage) };
  }

  private formatOf(storage: Storage): GpuMatrix["format"] {
    return storage === "float" ? (this.gpu.f16 ? "f16" : "f32") : storage;
  }

  private partBytes(storage: Storage, rows: number, cols: number): number {
    return storage === "float"
      ? rows * cols * this.elemBytes
      : quantLayout(storage, rows, cols).bytes;
  }

  /** Writes rows [from, from + rows) of a chunk as rows partRow.. of a part of `partRows` rows. */
  private writeRows(
    storage: Storage,
    buffer: GPUBuffer,
    partRows: number,
    cols: number,
    partRow: number,
    data: Uint8Array | Uint16Array | Float32Array,
    from: number,
    rows: number,
  ): void {
    if (storage === "float") {
      const values = data.subarray(from * cols, (from + rows) * cols);
      const offset = partRow * cols * this.elemBytes;
      // WebGPU writes need 4-byte alignment; an odd f16 row length only works for whole vectors.
      if (offset % 4 !== 0) {
        throw new Error(`f16 storage needs an even number of columns (has ${cols})`);
      }
      writeBytes(this.gpu, buffer, offset, values);
      return;
    }
    const rowBytes = (cols / GGML_BLOCKS[ggmlName(storage)].elems) *
      GGML_BLOCKS[ggmlName(storage)].bytes;
    const bytes = (data as Uint8Array).subarray(from * rowBytes, (from + rows) * rowBytes);
    writeQuantRows(this.gpu, buffer, quantLayout(storage, partRows, cols), partRow, bytes, rows);
  }

  /**
   * Reads `source` in chunks of whole rows (whole heads where rows are permuted), undoes the RoPE
   * permutation, and hands each chunk on: raw GGML bytes for quantized storage, else values in
   * the GPU dtype.
   */
  private async stream(
    source: Source,
    storage: Storage,
    write: (row0: number, rows: number, data: Uint8Array | Uint16Array | Float32Array) => void,
  ): Promise<void> {
    const { t, heads } = source;
    const cols = t.dims[0];
    const rows = t.dims.length === 1 ? 1 : t.dims[1];
    const block = GGML_BLOCKS[t.typeName as GgmlTypeName];
    const rowBytes = (cols / block.elems) * block.bytes;
    const group = heads ? rows / heads : 1;
    const groupsPerChunk = Math.max(
      1,
      Math.floor(WEIGHT_CHUNK_BYTES / (rowBytes * group)),
    );
    for (let r = 0; r < rows; r += groupsPerChunk * group) {
      const n = Math.min(groupsPerChunk * group, rows - r);
      let raw: Uint8Array = new Uint8Array(n * rowBytes);
      await readTensorInto({
        name: t.name,
        dtype: "F32",
        shape: t.dims,
        file: t.file,
        dataOffset: t.dataOffset + r * rowBytes,
        byteLength: raw.byteLength,
      }, raw);
      if (heads) raw = unpermuteRows(raw, n / group, group, rowBytes);
      if (storage !== "float") {
        this.checkScales(t, raw, r * cols);
        write(r, n, raw);
      } else {
        write(r, n, this.toGpuFloat(t, raw, r * cols, n * cols));
      }
      this.read(raw.byteLength);
    }
  }

  /** GGML bytes of any loadable type to the GPU's float dtype, refusing NaN and Inf. */
  private toGpuFloat(t: GgufTensor, raw: Uint8Array, first: number, count: number) {
    const type = t.typeName as GgmlTypeName;
    const quant = type.toLowerCase();
    if (isQuantType(quant)) {
      const values = dequantize(quant, raw, count);
      const bad = values.findIndex((v) => !Number.isFinite(v));
      if (bad >= 0) this.failNonFinite(t, first + bad);
      if (!this.gpu.f16) return values;
      const out = new Uint16Array(count);
      for (let i = 0; i < count; i++) out[i] = f32ToF16Bits(values[i]);
      return out;
    }
    const dtype = type as "F32" | "F16" | "BF16";
    const bad = firstNonFinite(raw, dtype);
    if (bad >= 0) this.failNonFinite(t, first + bad);
    return convert(raw, dtype, this.gpu.f16);
  }

  /** Refuses quantized bytes (whole blocks from element `first` on) with a NaN or Inf scale. */
  private checkScales(t: GgufTensor, raw: Uint8Array, first: number): void {
    const quant = t.typeName.toLowerCase();
    if (!isQuantType(quant)) return;
    const bad = firstNonFiniteBlock(raw, quant);
    if (bad >= 0) this.failNonFinite(t, first + bad * QUANT_FORMATS[quant].blockElems);
  }

  private failNonFinite(t: GgufTensor, element: number): never {
    throw new ModelLoadError(
      t.file,
      `tensor "${t.name}" holds NaN or Inf (element ${element} of ggml [${t.dims.join(", ")}]); ` +
        `the file is corrupt or was converted badly`,
    );
  }
}

/** The one quantized type all tensors share, else float (dequantized where need be). */
function storageOf(tensors: GgufTensor[]): Storage {
  const types = new Set(tensors.map((t) => t.typeName.toLowerCase()));
  const [only] = types;
  return types.size === 1 && isQuantType(only) ? only : "float";
}

function ggmlName(type: QuantType): GgmlTypeName {
  return type.toUpperCase() as GgmlTypeName;
}

/** `add` added to every value of a vector in the GPU's float dtype (f32, or f16 bits). */
function addTo(data: Float32Array | Uint16Array, add: number): Float32Array | Uint16Array {
  if (data instanceof Float32Array) return data.map((v) => v + add);
  return data.map((bits) => f32ToF16Bits(f16BitsToF32(bits) + add));
}
