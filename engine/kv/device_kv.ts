// The device tier of the paged KV cache: one pool of blocks shared by every layer, and the block
// table the kernels read.
//
// The pool is split into arenas only where the adapter's binding limit requires it: arena a is a K
// and a V buffer of blocksPerArena[a] blocks, each [blockSize, numKvHeads, headDim] of KV (f16 on
// the f16 path, else f32, unless --kv-dtype chose; q8_0 blocks as kv_format.ts lays them out),
// serving the layers with layerArena[l] = a. The block table is u32
// [numLayers, maxSlots, maxBlocksPerSeq]; entry (l, slot, i) is the block, within layer l's arena,
// holding that slot's positions i*blockSize..(i+1)*blockSize-1, or NOT_RESIDENT. Table rows are
// uploaded with queue.writeBuffer, never read back.

import { type Gpu, kvDtypeOf } from "../gpu/device.ts";
import { createStorage, writeBytes } from "../gpu/buffers.ts";
import { kvBlockBytes } from "./kv_format.ts";
import { blocksPerLayer, layersPerArena, NOT_RESIDENT, type PoolShape } from "./pool_shape.ts";

export interface KvModelDims {
  numLayers: number;
  numKvHeads: number;
  headDim: number;
}

export interface KvLayout extends KvModelDims, PoolShape {
  /** Running-batch slots the block table has rows for. */
  maxSlots: number;
  /** Table entries per (layer, slot): ceil(max sequence length / blockSize). */
  maxBlocksPerSeq: number;
}

/** One block-table update: entries (layer, slot, first..first+blocks.length-1). */
export interface TableWrite {
  slot: number;
  layer: number;
  first: number;
  blocks: number[];
}

export class DeviceKv {
  /** K buffer per arena. */
  readonly k: GPUBuffer[];
  /** V buffer per arena. */
  readonly v: GPUBuffer[];
  readonly blockTable: GPUBuffer;
  /** Bytes of all buffers together. */
  readonly bytes: number;

  constructor(private readonly gpu: Gpu, readonly layout: KvLayout) {
    validateLayout(layout);
    const perBlock = DeviceKv.bytesPerBlock(gpu, layout);
    const limit = Math.min(gpu.maxBinding, gpu.maxBufferSize);
    const tableBytes = tableEntries(layout) * 4;
    if (tableBytes > limit) {
      throw new RangeError(
        `the block table would be ${tableBytes} bytes, above the device limit ${limit}`,
      );
    }
    this.k = [];
    this.v = [];
    let bytes = tableBytes;
    layout.blocksPerArena.forEach((blocks, a) => {
      const size = blocks * perBlock;
      if (size > limit) {
        throw new RangeError(
          `KV arena ${a} would be ${size} bytes, above the device limit ${limit}`,
        );
      }
      this.k.push(createStorage(gpu, size, `kv.k${a}`));
      this.v.push(createStorage(gpu, size, `kv.v${a}`));
      bytes += 2 * size;
    });
    this.blockTable = createStorage(gpu, tableBytes, "kv.blockTable");
    this.bytes = bytes;
  }

  /** Bytes of one block of K (the same again for V). */
  static bytesPerBlock(
    gpu: Gpu,
    dims: { blockSize: number; numKvHeads: number; headDim: number },
  ): number {
    return kvBlockBytes(kvDtypeOf(gpu), dims);
  }

  /**
   * The largest pool whose buffers fit in `budgetBytes` in total, with no buffer above the device's
   * binding or buffer limit. The pool is also capped at what maxSlots requests of maxSeqLen tokens
   * could ever use. Arenas are as few as the binding limit allows; blocks are shared out in
   * proportion to the layers each arena serves.
   */
  static layoutForBudget(
    gpu: Gpu,
    dims: KvModelDims,
    budgetBytes: number,
    maxSlots: number,
    maxSeqLen: number,
    blockSize = 16,
  ): KvLayout {
    const L = dims.numLayers;
    const maxBlocksPerSeq = Math.ceil(maxSeqLen / blockSize);
    const perBlock = DeviceKv.bytesPerBlock(gpu, { ...dims, blockSize });
    const tableBytes = L * maxSlots * maxBlocksPerSeq * 4;
    const byBudget = Math.floor((budgetBytes - tableBytes) / (2 * perBlock));
    const total = Math.min(byBudget, L * maxSlots * maxBlocksPerSeq);
    const perArena = Math.floor(Math.min(gpu.maxBinding, gpu.maxBufferSize) / perBlock);
    if (perArena < 1) {
      throw new RangeError(
        `one KV block (${perBlock} bytes) is larger than the device's binding limit`,
      );
    }
    // Fewest arenas such that the arena serving the most layers (ceil(L / n) of them) still gets
    // its proportional share of blocks within one buffer.
    let numArenas = 1;
    while (numArenas < L && Math.ceil(L / numArenas) * total > perArena * L) numArenas++;
    const layerArena = Array.from({ length: L }, (_, l) => Math.floor((l * numArenas) / L));
    const blocksPerArena = layersPerArena(layerArena, numArenas).map((n) =>
      Math.min(perArena, Math.floor((total * n) / L))
    );
    if (blocksPerLayer({ blocksPerArena, layerArena }) < 1) {
      throw new RangeError(
        `KV budget of ${budgetBytes} bytes holds less than one block per layer: a block ` +
          `(K and V) needs ${2 * perBlock} bytes, and the block table ${tableBytes}`,
      );
    }
    const layout = { ...dims, blockSize, maxSlots, maxBlocksPerSeq, blocksPerArena, layerArena };
    validateLayout(layout);
    return layout;
  }

  /** The K buffer layer `layer` reads and writes. */
  kOf(layer: number): GPUBuffer {
    return this.k[this.layout.layerArena[layer]];
  }

  /** The V buffer layer `layer` reads and writes. */
  vOf(layer: number): GPUBuffer {
    return this.v[this.layout.layerArena[layer]];
  }

  /** Uploads table entries (layer, slot, first..first+blocks.length-1). */
  writeTable(slot: number, layer: number, blocks: readonly number[], first = 0): void {
    this.checkTable(slot, layer, blocks, first);
    if (blocks.length === 0) return;
    const { maxSlots, maxBlocksPerSeq } = this.layout;
    const entry = (layer * maxSlots + slot) * maxBlocksPerSeq + first;
    writeBytes(this.gpu, this.blockTable, entry * 4, Uint32Array.from(blocks));
  }

  /** Throws what writeTable would throw, writing nothing. */
  checkTable(slot: number, layer: number, blocks: readonly number[], first = 0): void {
    const { numLayers, maxSlots, maxBlocksPerSeq, blocksPerArena, layerArena } = this.layout;
    requireIndex("slot", slot, maxSlots);
    requireIndex("layer", layer, numLayers);
    if (!Number.isInteger(first) || first < 0 || first + blocks.length > maxBlocksPerSeq) {
      throw new RangeError(
        `table entries ${first}..${
          first + blocks.length - 1
        } exceed maxBlocksPerSeq ${maxBlocksPerSeq}`,
      );
    }
    for (const b of blocks) {
      if (b !== NOT_RESIDENT) requireIndex("block id", b, blocksPerArena[layerArena[layer]]);
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
  const counts = {
    numLayers: layout.numLayers,
    numKvHeads: layout.numKvHeads,
    headDim: layout.headDim,
    blockSize: layout.blockSize,
    maxSlots: layout.maxSlots,
    maxBlocksPerSeq: layout.maxBlocksPerSeq,
  };
  for (const [name, value] of Object.entries(counts)) {
    if (!Number.isInteger(value) || value < 1) {
      throw new RangeError(`KV layout ${name} must be a positive integer, got ${value}`);
    }
  }
  if (layout.headDim % 4 !== 0) {
    throw new RangeError(`KV headDim must be a multiple of 4, got ${layout.headDim}`);
  }
  if (layout.layerArena.length !== layout.numLayers) {
    throw new RangeError(
      `KV layout maps ${layout.layerArena.length} layers, expected ${layout.numLayers}`,
    );
  }
}

function requireIndex(name: string, value: number, bound: number): void {
  if (!Number.isInteger(value) || value < 0 || value >= bound) {
    throw new RangeError(`${name} ${value} is out of range 0..${bound - 1}`);
  }
}
