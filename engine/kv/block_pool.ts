// Host-side bookkeeping of which KV blocks each sequence holds, per layer. No GPU here.
//
// Blocks are per layer so that a sequence can keep some layers on the device and others elsewhere.
// Allocation favours contiguous runs (FastSwitch-style block groups) so that moving a sequence's KV
// between tiers is a few large copies rather than many small ones:
//   - a growing sequence first takes the blocks right after its last block, while they are free;
//   - the rest comes from the lowest-addressed free run that holds it whole;
//   - only when no single run is large enough is it split, largest runs first (fewest pieces).

export type SeqId = number | string;

export class BlockPool {
  /** Blocks per layer. */
  readonly total: number;
  /** free[layer][block] = 1 when the block is unallocated. */
  private readonly freeMap: Uint8Array[];
  private readonly freeCount: number[];
  /** Per sequence, per layer, its blocks in position order. */
  private readonly owned = new Map<SeqId, number[][]>();

  constructor(readonly numLayers: number, numBlocksPerLayer: number, readonly blockSize = 16) {
    requireCount("numLayers", numLayers, 1);
    requireCount("numBlocksPerLayer", numBlocksPerLayer, 1);
    requireCount("blockSize", blockSize, 1);
    this.total = numBlocksPerLayer;
    this.freeMap = Array.from(
      { length: numLayers },
      () => new Uint8Array(numBlocksPerLayer).fill(1),
    );
    this.freeCount = new Array(numLayers).fill(numBlocksPerLayer);
  }

  /** Blocks needed to hold `tokens` positions. */
  blocksFor(tokens: number): number {
    requireCount("tokens", tokens, 0);
    return Math.ceil(tokens / this.blockSize);
  }

  /** True when every layer has at least `extra` free blocks (or extra[layer] when given per layer). */
  canAllocate(extra: number | readonly number[]): boolean {
    for (let layer = 0; layer < this.numLayers; layer++) {
      const want = typeof extra === "number" ? extra : extra[layer] ?? 0;
      if (want > this.freeCount[layer]) return false;
    }
    return true;
  }

  /**
   * Makes `seqId` hold enough blocks on `layer` for `tokenCount` positions in total. Returns the
   * newly added block ids in position order ([] when it already had enough), or null when the layer
   * has too few free blocks, in which case nothing changed.
   */
  grow(seqId: SeqId, layer: number, tokenCount: number): number[] | null {
    this.requireLayer(layer);
    const held = this.owned.get(seqId)?.[layer] ?? [];
    const need = this.blocksFor(tokenCount) - held.length;
    if (need <= 0) return [];
    if (need > this.freeCount[layer]) return null;

    const free = this.freeMap[layer];
    const added: number[] = [];
    // Extend the last run in place while the blocks after it are free.
    if (held.length > 0) {
      for (
        let b = held[held.length - 1] + 1;
        b < this.total && added.length < need && free[b];
        b++
      ) {
        free[b] = 0;
        added.push(b);
      }
    }
    const rest = need - added.length;
    if (rest > 0) {
      const picked = this.pickRuns(free, rest);
      for (const b of picked) free[b] = 0;
      added.push(...picked);
    }
    this.freeCount[layer] -= added.length;
    this.layersOf(seqId)[layer].push(...added);
    return added;
  }

  /** Frees every block `seqId` holds on every layer; returns how many were freed (0 if unknown). */
  release(seqId: SeqId): number {
    const layers = this.owned.get(seqId);
    if (!layers) return 0;
    let freed = 0;
    for (let layer = 0; layer < this.numLayers; layer++) freed += this.freeLayer(layers, layer);
    this.owned.delete(seqId);
    return freed;
  }

  /** Frees the blocks `seqId` holds on one layer (e.g. that layer moved to another tier). */
  releaseLayer(seqId: SeqId, layer: number): number {
    this.requireLayer(layer);
    const layers = this.owned.get(seqId);
    if (!layers) return 0;
    const freed = this.freeLayer(layers, layer);
    if (layers.every((blocks) => blocks.length === 0)) this.owned.delete(seqId);
    return freed;
  }

  /** The block ids `seqId` holds on `layer`, in position order (a copy). */
  table(seqId: SeqId, layer: number): number[] {
    this.requireLayer(layer);
    return [...(this.owned.get(seqId)?.[layer] ?? [])];
  }

  /** Number of maximal runs of consecutive block ids in `seqId`'s table on `layer`. */
  runsOf(seqId: SeqId, layer: number): number {
    const blocks = this.table(seqId, layer);
    let runs = 0;
    for (let i = 0; i < blocks.length; i++) if (i === 0 || blocks[i] !== blocks[i - 1] + 1) runs++;
    return runs;
  }

  used(layer: number): number {
    this.requireLayer(layer);
    return this.total - this.freeCount[layer];
  }

  free(layer: number): number {
    this.requireLayer(layer);
    return this.freeCount[layer];
  }

  /** Sequences holding at least one block. */
  sequences(): SeqId[] {
    return [...this.owned.keys()];
  }

  /**
   * `count` free blocks (count <= free blocks): the lowest-addressed run that holds them all, else
   * pieces from the largest runs (ties: lowest address), returned in address order per piece.
   */
  private pickRuns(free: Uint8Array, count: number): number[] {
    const runs: { start: number; length: number }[] = [];
    for (let b = 0; b < this.total;) {
      if (!free[b]) {
        b++;
        continue;
      }
      const start = b;
      while (b < this.total && free[b]) b++;
      if (b - start >= count) return range(start, count);
      runs.push({ start, length: b - start });
    }
    runs.sort((a, b) => b.length - a.length || a.start - b.start);
    const picked: number[] = [];
    for (const run of runs) {
      const take = Math.min(run.length, count - picked.length);
      picked.push(...range(run.start, take));
      if (picked.length === count) break;
    }
    return picked;
  }

  private freeLayer(layers: number[][], layer: number): number {
    const blocks = layers[layer];
    for (const b of blocks) this.freeMap[layer][b] = 1;
    this.freeCount[layer] += blocks.length;
    layers[layer] = [];
    return blocks.length;
  }

  private layersOf(seqId: SeqId): number[][] {
    let layers = this.owned.get(seqId);
    if (!layers) this.owned.set(seqId, layers = Array.from({ length: this.numLayers }, () => []));
    return layers;
  }

  private requireLayer(layer: number): void {
    if (!Number.isInteger(layer) || layer < 0 || layer >= this.numLayers) {
      throw new RangeError(`layer ${layer} is out of range 0..${this.numLayers - 1}`);
    }
  }
}

function requireCount(name: string, value: number, min: number): void {
  if (!Number.isInteger(value) || value < min) {
    throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
  }
}

function range(start: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => start + i);
}
