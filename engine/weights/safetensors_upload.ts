// Streams a Hugging Face checkpoint's safetensors tensors into GPU buffers, converting to the
// weight dtype (f16 where the adapter has it, else f32) and fusing QKV and gate/up on the way.
//
// Only one chunk of one tensor is on the host at a time, so the model is never held twice.
// Matrices whose size exceeds the adapter's binding limit are split into row parts; with the
// texture layout (--matmul-kernel), float matrices go into weight textures instead. Each chunk is
// checked for NaN and Inf as it passes (formats/finite_check.ts): a bad checkpoint fails the load.

import type { Gpu } from "../gpu/device.ts";
import { ModelLoadError } from "../model/errors.ts";
import { LM_HEAD } from "../model/tensors.ts";
import { firstNonFinite } from "../formats/finite_check.ts";
import type { ModelFiles } from "../formats/model_files.ts";
import { readTensorInto, type TensorInfo } from "../formats/safetensors.ts";
import type { WeightLayout } from "../gpu/weight_texture.ts";
import type { GluMatrix, GpuMatrix, MatrixPart } from "./model_weights.ts";
import {
  convertAdding,
  type LoadProgress,
  partShares,
  rowsPerPart,
  textureRowsPerPart,
  WEIGHT_CHUNK_BYTES,
  WeightUpload,
} from "./upload.ts";

export class SafetensorsUpload extends WeightUpload {
  private readonly files: ModelFiles;

  constructor(
    gpu: Gpu,
    files: ModelFiles,
    onProgress?: LoadProgress,
    floatLayout: WeightLayout = "storage",
  ) {
    const needed = [...files.tensors.values()].filter((t) =>
      t.name !== LM_HEAD || !files.config.tieWordEmbeddings
    );
    super(gpu, needed.reduce((sum, t) => sum + t.byteLength, 0), onProgress, floatLayout);
    this.files = files;
  }

  private tensor(name: string): TensorInfo {
    const t = this.files.tensors.get(name);
    if (!t) throw new Error(`tensor ${name} missing from ${this.files.dir}`);
    return t;
  }

  async vector(names: string[], add = 0): Promise<GPUBuffer> {
    const tensors = names.map((name) => this.tensor(name));
    const length = tensors.reduce((sum, t) => sum + t.shape[0], 0);
    const buffer = this.allocate(length * this.elemBytes, tensors[0].name);
    let offset = 0;
    for (const t of tensors) {
      await this.copyRows(t, 0, 1, buffer, offset, add);
      offset += t.shape[0] * this.elemBytes;
    }
    return buffer;
  }

  async matrix(names: string[]): Promise<GpuMatrix> {
    const tensors = names.map((name) => this.tensor(name));
    const cols = tensors[0].shape[1];
    const rows = tensors.reduce((sum, t) => sum + t.shape[0], 0);
    const bytes = (n: number) => n * cols * this.elemBytes;
    const parts: MatrixPart[] = this.floatTextures(rows, cols)
      ? this.allocateTextureParts(rows, textureRowsPerPart(this.gpu, cols), bytes, tensors[0].name)
      : this.allocateParts(rows, rowsPerPart(this.gpu, cols), bytes, tensors[0].name);
    let globalRow = 0;
    for (const t of tensors) {
      for (const share of partShares(parts, globalRow, t.shape[0])) {
        await this.copyRows(
          t,
          share.from,
          share.rows,
          share.part.buffer ?? share.part.texture,
          share.partRow * cols * this.elemBytes,
        );
      }
      globalRow += t.shape[0];
    }
    return { rows, cols, parts };
  }

  async glu(gateName: string, upName: string): Promise<GluMatrix> {
    const gate = this.tensor(gateName), up = this.tensor(upName);
    const [intermediate, cols] = gate.shape;
    const bytes = (n: number) => 2 * n * cols * this.elemBytes;
    const parts: MatrixPart[] = this.floatTextures(intermediate, cols, 2)
      ? this.allocateTextureParts(
        intermediate,
        textureRowsPerPart(this.gpu, cols, 2),
        bytes,
        gate.name,
      )
      : this.allocateParts(intermediate, rowsPerPart(this.gpu, cols, 2), bytes, gate.name);
    for (const part of parts) {
      const dst = part.buffer ?? part.texture;
      await this.copyRows(gate, part.rowStart, part.rows, dst, 0);
      await this.copyRows(up, part.rowStart, part.rows, dst, part.rows * cols * this.elemBytes);
    }
    return { intermediate, cols, parts };
  }

  /** Copies rows [row0, row0 + rows) of `t` (a vector counts as one row) to `dst` at `dstOffset`. */
  private async copyRows(
    t: TensorInfo,
    row0: number,
    rows: number,
    dst: GPUBuffer | GPUTexture,
    dstOffset: number,
    add = 0,
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
      const converted = convertAdding(raw, t.dtype, this.gpu.f16, add);
      const offset = dstOffset + r * cols * this.elemBytes;
      // WebGPU writes need 4-byte alignment; an odd f16 row length only works for whole vectors.
      if (offset % 4 !== 0) {
        throw new Error(`${t.name}: f16 storage needs an even number of columns (has ${cols})`);
      }
      this.writePart(dst, offset, converted);
      this.read(raw.byteLength);
    }
  }
}
