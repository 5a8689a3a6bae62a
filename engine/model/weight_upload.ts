// What every weight loader (safetensors, GGUF) keeps while it streams tensors to the GPU: the
// buffers it allocates and their bytes, the host bytes read so far for the progress bar, and the
// bounded host chunk that keeps a model from being held twice.

import type { Gpu } from "../gpu/device.ts";
import { createStorage } from "../gpu/buffers.ts";

export type LoadProgress = (loadedBytes: number, totalBytes: number) => void;

/** Host chunk size: large enough for few reads, small enough to stay off the memory budget. */
export const WEIGHT_CHUNK_BYTES = 16 << 20;

export class WeightUpload {
  /** Bytes of GPU buffers allocated for weights. */
  gpuBytes = 0;
  /** Bytes per element of the GPU's float weight dtype. */
  protected readonly elemBytes: number;
  private loaded = 0;

  constructor(
    protected readonly gpu: Gpu,
    private readonly totalBytes: number,
    private readonly onProgress?: LoadProgress,
  ) {
    this.elemBytes = gpu.f16 ? 2 : 4;
  }

  protected allocate(bytes: number, label: string): GPUBuffer {
    this.gpuBytes += bytes;
    return createStorage(this.gpu, bytes, label);
  }

  /** Counts `bytes` of the checkpoint read from disk, and reports progress. */
  protected read(bytes: number): void {
    this.loaded += bytes;
    this.onProgress?.(this.loaded, this.totalBytes);
  }
}
