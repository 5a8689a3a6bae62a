// The host tier of the KV cache: blocks the device pool moved out, in plain ArrayBuffers.
//
// A host block holds one block of any layer, K and V, in the device's layout and dtype, so a copy
// is a byte move both ways. Storage comes in chunks allocated on first use: a large --host-kv-mb
// costs nothing until requests are swapped out. Within a chunk, K of its blocks comes first, then
// V, so a run of consecutive host blocks inside one chunk is one contiguous range of each.
// Which block holds what is the runtime's bookkeeping; this file only stores bytes.

/** Chunk size: large enough that block groups rarely split at a chunk edge. */
const CHUNK_BYTES = 32 << 20;

export class HostKv {
  /** Host blocks in the tier. */
  readonly blocks: number;
  /** Blocks per storage chunk; host runs must not cross a multiple of it. */
  readonly chunkBlocks: number;
  private readonly chunks: (Uint8Array<ArrayBuffer> | null)[];

  /** `bytesPerBlock`: one block of K (V is the same again). */
  constructor(readonly bytesPerBlock: number, budgetBytes: number, chunkBytes = CHUNK_BYTES) {
    if (!Number.isInteger(bytesPerBlock) || bytesPerBlock < 1) {
      throw new RangeError(`bytesPerBlock must be a positive integer, got ${bytesPerBlock}`);
    }
    this.blocks = HostKv.blocksFor(budgetBytes, bytesPerBlock);
    this.chunkBlocks = Math.max(1, Math.floor(chunkBytes / (2 * bytesPerBlock)));
    this.chunks = new Array(Math.ceil(this.blocks / this.chunkBlocks)).fill(null);
  }

  /** Host blocks a budget holds: each needs K and V. */
  static blocksFor(budgetBytes: number, bytesPerBlock: number): number {
    if (!(budgetBytes >= 0)) {
      throw new RangeError(`host KV budget must be >= 0, got ${budgetBytes}`);
    }
    return Math.floor(budgetBytes / (2 * bytesPerBlock));
  }

  /** Bytes of storage allocated so far. */
  get allocatedBytes(): number {
    return this.chunks.reduce((n, c) => n + (c?.byteLength ?? 0), 0);
  }

  /** K of host blocks first..first+count-1 (one chunk), as a view to read or fill. */
  k(first: number, count: number): Uint8Array<ArrayBuffer> {
    return this.view(first, count, 0);
  }

  /** V of host blocks first..first+count-1 (one chunk). */
  v(first: number, count: number): Uint8Array<ArrayBuffer> {
    return this.view(first, count, 1);
  }

  private view(first: number, count: number, part: 0 | 1): Uint8Array<ArrayBuffer> {
    const c = Math.floor(first / this.chunkBlocks);
    const i = first - c * this.chunkBlocks;
    const inChunk = this.blocksIn(c);
    if (!Number.isInteger(first) || first < 0 || count < 1 || i + count > inChunk) {
      throw new RangeError(
        `host blocks ${first}..${first + count - 1} are not within one chunk of ` +
          `${this.chunkBlocks} blocks (tier of ${this.blocks})`,
      );
    }
    const chunk = this.chunks[c] ??= new Uint8Array(2 * inChunk * this.bytesPerBlock);
    const start = (part * inChunk + i) * this.bytesPerBlock;
    return chunk.subarray(start, start + count * this.bytesPerBlock);
  }

  private blocksIn(chunk: number): number {
    return Math.max(0, Math.min(this.chunkBlocks, this.blocks - chunk * this.chunkBlocks));
  }
}
