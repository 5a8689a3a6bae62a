// The device tier of the paged KV cache: per-layer K and V buffers and the block table the kernels read.
//
// Layer l's K (and V) buffer is [numBlocks, blockSize, numKvHeads, headDim] of W (f16 on the f16 path,
// else f32). The block table is u32 [numLayers, maxSlots, maxBlocksPerSeq]; entry
// (l, slot, i) is the block (within layer l's buffers) holding that slot's positions
// i*blockSize..(i+1)*blockSize-1. Table rows are uploaded with queue.writeBuffer, never read back.

import type { Gpu } from "../gpu/device.ts";
import { createStorage, writeBytes } from "../gpu/buffers.ts";

export interface KvLayout {
  numLayers: number;
  numKvHeads: number;
  headDim: number;
  /** Tokens per block. */
  blockSize: number;
  /** Blocks per layer (each layer has its own K and V buffers of this many blocks). */
  numBlocks: number;
  /** Running-batch slots the block table has rows for. */
  maxSlots: number;
  /** Table entries per (layer, slot): ceil(max sequence length / blockSize). */
  maxBlocksPerSeq: number;
}

export interface KvModelDims {
  numLayers: number;
  numKvHeads: number;
  headDim: number;
}

export class DeviceKv {
  readonly k: GPUBuffer[];
  readonly v: GPUBuffer[];
  readonly blockTable: GPUBuffer;
  /** Bytes of all buffers together. */
  readonly bytes: number;

  constructor(private readonly gpu: Gpu, readonly layout: KvLayout) {
    validateLayout(layout);
    const kvBytes = DeviceKv.bytesPerBlock(gpu, layout) * layout.numBlocks;
    const limit = Math.min(gpu.maxBinding, gpu.maxBufferSize);
    if (kvBytes > limit) {
      throw new RangeError(
        `one layer's K buffer would be ${kvBytes} bytes, above the device limit ${limit}`,
      );
    }
    const tableBytes = tableEntries(layout) * 4;
    if (tableBytes > limit) {
      throw new RangeError(
        `the block table would be ${tableBytes} bytes, above the device limit ${limit}`,
      );
    }
    this.k = [];
    this.v = [];
    for (let l = 0; l < layout.numLayers; l++) {
      this.k.push(createStorage(gpu, kvBytes, `kv.k${l}`));
      this.v.push(createStorage(gpu, kvBytes, `kv.v${l}`));
    }
    this.blockTable = createStorage(gpu, tableBytes, "kv.blockTable");
    this.bytes = 2 * layout.numLayers * kvBytes + tableBytes;
  }

  /** Bytes of one block of K (the same again for V) in one layer. */
  static bytesPerBlock(
    gpu: Gpu,
    dims: { blockSize: number; numKvHeads: number; headDim: number },
  ): number {
    return dims.blockSize * dims.numKvHeads * dims.headDim * (gpu.f16 ? 2 : 4);
  }

  /**
   * The largest layout whose buffers fit in `budgetBytes` in total, with no single buffer above the
   * device's binding or buffer limit. numBlocks is also capped at what maxSlots sequences of
   * maxSeqLen tokens could ever use.
   */
  static layoutForBudget(
    gpu: Gpu,
    dims: KvModelDims,
    budgetBytes: number,
    maxSlots: number,
    maxSeqLen: number,
    blockSize = 16,
  ): KvLayout {
    const maxBlocksPerSeq = Math.ceil(maxSeqLen / blockSize);
    const base = { ...dims, blockSize, maxSlots, maxBlocksPerSeq, numBlocks: 1 };
    validateLayout(base);
    const perBlock = DeviceKv.bytesPerBlock(gpu, base);
    const tableBytes = tableEntries(base) * 4;
    const byBudget = Math.floor((budgetBytes - tableBytes) / (2 * dims.numLayers * perBlock));
    const byBuffer = Math.floor(Math.min(gpu.maxBinding, gpu.maxBufferSize) / perBlock);
    const numBlocks = Math.min(byBudget, byBuffer, maxSlots * maxBlocksPerSeq);
    if (numBlocks < 1) {
      throw new RangeError(
        `KV budget of ${budgetBytes} bytes holds no block: one block in every layer (K and V) needs ` +
          `${2 * dims.numLayers * perBlock} bytes plus ${tableBytes} for the block table`,
      );
    }
    return { ...base, numBlocks };
  }

  /** Uploads table entries (layer, slot, first..first+blockIds.length-1). */
  writeTable(slot: number, layer: number, blockIds: readonly number[], first = 0): void {
    const { numLayers, maxSlots, maxBlocksPerSeq, numBlocks } = this.layout;
    requireIndex("slot", slot, maxSlots);
    requireIndex("layer", layer, numLayers);
    if (!Number.isInteger(first) || first < 0 || first + blockIds.length > maxBlocksPerSeq) {
      throw new RangeError(
        `table entries ${first}..${
          first + blockIds.length - 1
        } exceed maxBlocksPerSeq ${maxBlocksPerSeq}`,
      );
    }
    if (blockIds.length === 0) return;
    const row = new Uint32Array(blockIds.length);
    blockIds.forEach((b, i) => {
      requireIndex("block id", b, numBlocks);
      row[i] = b;
    });
    const entry = (layer * maxSlots + slot) * maxBlocksPerSeq + first;
    writeBytes(this.gpu, this.blockTable, entry * 4, row);
  }

  /** Zeroes a slot's table rows on every layer (the slot's request left the batch). */
  clearSlot(slot: number): void {
    const { numLayers, maxSlots, maxBlocksPerSeq } = this.layout;
    requireIndex("slot", slot, maxSlots);
    const zeros = new Uint32Array(maxBlocksPerSeq);
    for (let l = 0; l < numLayers; l++) {
      writeBytes(this.gpu, this.blockTable, (l * maxSlots + slot) * maxBlocksPerSeq * 4, zeros);
    }
  }

  destroy(): void {
    for (const b of [...this.k, ...this.v, this.blockTable]) b.destroy();
  }
}

function tableEntries(layout: KvLayout): number {
  return layout.numLayers * layout.maxSlots * layout.maxBlocksPerSeq;
}

function validateLayout(layout: KvLayout): void {
  for (const [name, value] of Object.entries(layout)) {
    if (!Number.isInteger(value) || value < 1) {
      throw new RangeError(`KV layout ${name} must be a positive integer, got ${value}`);
    }
  }
  if (layout.headDim % 4 !== 0) {
    throw new RangeError(`KV headDim must be a multiple of 4, got ${layout.headDim}`);
  }
}

function requireIndex(name: string, value: number, bound: number): void {
  if (!Number.isInteger(value) || value < 0 || value >= bound) {
    throw new RangeError(`${name} ${value} is out of range 0..${bound - 1}`);
  }
}
