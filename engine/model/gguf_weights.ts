// Streams a GGUF model's tensors into GPU buffers, chunk by chunk as weights.ts does for
// safetensors: float tensors (F32, F16, BF16) become the GPU's weight dtype, quantized ones (Q8_0,
// Q4_0, Q4_K, Q6_K) stay quantized, repacked by quant_layout.ts for the dequantizing kernels.
//
// llama.cpp's converter permutes the rows of attn_q and attn_k within each head so that its
// interleaved RoPE (pairs 2i, 2i+1) computes what Hugging Face's rotate-half RoPE (pairs i,
// i + headDim/2) does. Sluice's rope kernel is rotate-half, so the rows are put back on the way:
// whole rows move, which works for quantized rows as well (a block never spans two rows).
//
// Fused matrices (qkv, gate/up) need one format: Q4_K_M files give attn_v or ffn_down Q6_K in
// some layers, and where the tensors of one fused matrix differ, that matrix is dequantized to
// the GPU's float dtype instead.

import type { Gpu } from "../gpu/device.ts";
import { writeBytes } from "../gpu/buffers.ts";
import { f32ToF16Bits } from "../quant/half.ts";
import { quantLayout, quantRowsPerPart, writeQuantRows } from "../gpu/kernels/quant_layout.ts";
import { ModelLoadError } from "./errors.ts";
import { firstNonFinite } from "../formats/finite_check.ts";
import { GGML_BLOCKS, type GgmlTypeName, type GgufTensor } from "../formats/gguf.ts";
import { ggufTensorOf } from "../formats/gguf_model.ts";
import type { ModelFiles } from "../formats/model_files.ts";
import { dequantize, isQuantType, type QuantType } from "../quant/formats.ts";
import { readTensorInto } from "../formats/safetensors.ts";
import { WEIGHT_CHUNK_BYTES, WeightUpload } from "./weight_upload.ts";
import {
  convert,
  type GluMatrix,
  type GpuMatrix,
  type LayerWeights,
  type LoadProgress,
  type MatrixPart,
  type ModelWeights,
  rowsPerPart,
} from "./weights.ts";

export async function loadGgufWeights(
  gpu: Gpu,
  files: ModelFiles,
  onProgress?: LoadProgress,
): Promise<ModelWeights> {
  const cfg = files.config;
  const gguf = files.gguf!;
  const tensor = (hfName: string) => ggufTensorOf(gguf, hfName);
  const needed = [...gguf.tensors.values()].filter((t) =>
    t.supported && t.name !== "rope_freqs.weight"
  );
  const writer = new GgufWeightWriter(
    gpu,
    needed.reduce((s, t) => s + t.byteLength, 0),
    onProgress,
  );

  const embed = await writer.matrix([{ t: tensor("model.embed_tokens.weight") }]);
  const layers: LayerWeights[] = [];
  for (let i = 0; i < cfg.numLayers; i++) {
    const p = `model.layers.${i}.`;
    layers.push({
      inputNorm: await writer.vector(tensor(p + "input_layernorm.weight")),
      postAttentionNorm: await writer.vector(tensor(p + "post_attention_layernorm.weight")),
      qkv: await writer.matrix([
        { t: tensor(p + "self_attn.q_proj.weight"), heads: cfg.numHeads },
        { t: tensor(p + "self_attn.k_proj.weight"), heads: cfg.numKvHeads },
        { t: tensor(p + "self_attn.v_proj.weight") },
      ]),
      o: await writer.matrix([{ t: tensor(p + "self_attn.o_proj.weight") }]),
      gateUp: await writer.glu(
        tensor(p + "mlp.gate_proj.weight"),
        tensor(p + "mlp.up_proj.weight"),
      ),
      down: await writer.matrix([{ t: tensor(p + "mlp.down_proj.weight") }]),
    });
  }
  const finalNorm = await writer.vector(tensor("model.norm.weight"));
  const lmHead = cfg.tieWordEmbeddings
    ? embed
    : await writer.matrix([{ t: tensor("lm_head.weight") }]);
  return { embed, layers, finalNorm, lmHead, bytes: writer.gpuBytes };
}

/** A source tensor of a matrix; `heads` when its rows carry llama.cpp's RoPE permutation. */
interface Source {
  t: GgufTensor;
  heads?: number;
}

/** How a matrix is stored: one quantized type, or the GPU's float dtype. */
type Storage = QuantType | "float";

class GgufWeightWriter extends WeightUpload {
  async vector(t: GgufTensor): Promise<GPUBuffer> {
    const buffer = this.allocate(t.dims[0] * this.elemBytes, t.name);
    await this.stream({ t }, "float", (_row0, _rows, data) => {
      writeBytes(this.gpu, buffer, 0, data as ArrayBufferView);
    });
    return buffer;
  }

  /** Stacks the sources by rows into one matrix, split into parts by the binding limit. */
  async matrix(sources: Source[]): Promise<GpuMatrix> {
    const cols = sources[0].t.dims[0];
    const rows = sources.reduce((sum, s) => sum + s.t.dims[1], 0);
    const storage = storageOf(sources.map((s) => s.t));
    const perPart = storage === "float"
      ? rowsPerPart(this.gpu, cols)
      : quantRowsPerPart(this.gpu, storage, cols);
    const parts: MatrixPart[] = [];
    for (let rowStart = 0; rowStart < rows; rowStart += perPart) {
      const n = Math.min(perPart, rows - rowStart);
      parts.push({
        buffer: this.allocate(this.partBytes(storage, n, cols), sources[0].t.name),
        rowStart,
        rows: n,
      });
    }
    let base = 0;
    for (const source of sources) {
      await this.stream(source, storage, (row0, n, data) => {
        // A chunk may straddle parts: write each part its share.
        for (let done = 0; done < n;) {
          const global = base + row0 + done;
          const part = parts.find((p) => global >= p.rowStart && global < p.rowStart + p.rows)!;
          const take = Math.min(n - done, part.rowStart + part.rows - global);
          this.writeRows(
            storage,
            part.buffer,
            part.rows,
            cols,
            global - part.rowStart,
            data,
            done,
            take,
          );
          done += take;
        }
      });
      base += source.t.dims[1];
    }
    return { rows, cols, parts, format: this.formatOf(storage) };
  }

  /** Gate rows [a, b) then up rows [a, b) in each part, one layout of 2(b - a) rows (GluMatrix). */
  async glu(gate: GgufTensor, up: GgufTensor): Promise<GluMatrix> {
    const [cols, intermediate] = gate.dims;
    const storage = storageOf([gate, up]);
    const perPart = storage === "float"
      ? rowsPerPart(this.gpu, cols, 2)
      : quantRowsPerPart(this.gpu, storage, cols, 2);
    const parts: MatrixPart[] = [];
    for (let rowStart = 0; rowStart < intermediate; rowStart += perPart) {
      const n = Math.min(perPart, intermediate - rowStart);
      parts.push({
        buffer: this.allocate(this.partBytes(storage, 2 * n, cols), gate.name),
        rowStart,
        rows: n,
      });
    }
    for (const [which, t] of [gate, up].entries()) {
      await this.stream({ t }, storage, (row0, n, data) => {
        for (let done = 0; done < n;) {
          const global = row0 + done;
          const part = parts.find((p) => global >= p.rowStart && global < p.rowStart + p.rows)!;
          const take = Math.min(n - done, part.rowStart + part.rows - global);
          const partRow = which * part.rows + global - part.rowStart;
          this.writeRows(storage, part.buffer, 2 * part.rows, cols, partRow, data, done, take);
          done += take;
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

/**
 * Undoes convert_hf_to_gguf.py's permute() on `heads` heads of `group` rows each: GGUF row
 * 2i + s of a head holds Hugging Face row s * group/2 + i.
 */
export function unpermuteRows(
  raw: Uint8Array,
  heads: number,
  group: number,
  rowBytes: number,
): Uint8Array {
  const out = new Uint8Array(raw.length);
  const half = group / 2;
  for (let h = 0; h < heads; h++) {
    for (let i = 0; i < half; i++) {
      for (let s = 0; s < 2; s++) {
        const src = (h * group + 2 * i + s) * rowBytes;
        const dst = (h * group + s * half + i) * rowBytes;
        out.set(raw.subarray(src, src + rowBytes), dst);
      }
    }
  }
  return out;
}
