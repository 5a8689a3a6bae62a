// A ring of mappable buffers for reading small results back without waiting on them: each step
// copies its results into the next ring entry, and the host maps that entry once the GPU has
// finished, a few steps later. An entry is busy from the step that fills it until its bytes have
// been read and it is unmapped; when every entry is busy, the caller must await an older read.

import type { Gpu } from "./device.ts";

/** One buffer of the ring and the read in flight on it. */
export interface RingEntry {
  buffer: GPUBuffer;
  /** The read in flight (settled or not), for idle(). */
  pending: Promise<void> | null;
  /** True from the read's start until it has resolved and the buffer is unmapped. */
  busy: boolean;
}

export class ReadbackRing {
  private readonly entries: RingEntry[] = [];
  private next = 0;

  /** `size` entries of `bytes` bytes each. */
  constructor(gpu: Gpu, size: number, bytes: number) {
    for (let i = 0; i < size; i++) {
      this.entries.push({
        buffer: gpu.device.createBuffer({
          size: bytes,
          usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
        }),
        pending: null,
        busy: false,
      });
    }
  }

  get size(): number {
    return this.entries.length;
  }

  /** Whether the entry take() would hand out is still being read. */
  get full(): boolean {
    return this.entries[this.next].busy;
  }

  /** The next entry, in turn: the caller copies into its buffer, then read()s it. */
  take(): RingEntry {
    const entry = this.entries[this.next];
    this.next = (this.next + 1) % this.entries.length;
    return entry;
  }

  /**
   * Maps the first `bytes` of `entry` once the GPU has written them (after the submission that
   * copies into it), and resolves with `decode` of them as u32 words; the entry is free again
   * after.
   */
  read<T>(entry: RingEntry, bytes: number, decode: (words: Uint32Array) => T): Promise<T> {
    entry.busy = true;
    const read = entry.buffer.mapAsync(GPUMapMode.READ, 0, bytes).then(() => {
      const words = new Uint32Array(entry.buffer.getMappedRange(0, bytes).slice(0));
      entry.buffer.unmap();
      return decode(words);
    }).finally(() => entry.busy = false);
    entry.pending = read.then(() => {}, () => {});
    return read;
  }

  /** Resolves when every read started has settled. */
  async idle(): Promise<void> {
    await Promise.all(this.entries.map((entry) => entry.pending));
  }

  destroy(): void {
    for (const entry of this.entries) entry.buffer.destroy();
  }
}
