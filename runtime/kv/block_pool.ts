// Bookkeeping of a KV pool: which blocks each (request, layer) holds. No GPU here: the device
// pool's blocks live in engine/kv/device_kv.ts, and the host tier (kv/host_tier.ts) keeps its own
// books with this class too.
//
// The pool is shared by every layer, so KV freed by one layer (a finished request, a layer moved
// to the host) is room any other layer can use. The device's binding limit can force the pool
// into several arenas (one K and one V buffer each); an arena serves a fixed set of layers, and a
// layer's blocks always come from its own arena.
//
// Blocks can be shared (prefix caching): a block counts its holders, and a block the prefix index
// has cached stays out of the free list after its last holder leaves ("idle"), until the index
// evicts it to make room (the pool asks it through `reclaimer` before it says no).
//
// Allocation favours contiguous runs (FastSwitch-style block groups) so that moving a request's KV
// between tiers is a few large copies rather than many small ones:
//   - a growing table first takes the blocks right after its last block, while they are free;
//   - the rest comes from the lowest-addressed free run that holds it whole;
//   - only when no single run is large enough is it split, largest runs first (fewest pieces).

import { blocksPerLayer, layersPerArena, type PoolShape } from "../../engine/kv/pool_shape.ts";

export type SeqId = number | string;

/** In a table: a block dropped from the front (eLLM) and not yet refilled. */
export const DROPPED = -1;

/**
 * In a table: a block whose KV lives only in the host tier (an offloaded layer's full blocks).
 * Unlike DROPPED, grow() never refills it: the step brings it into the prefetch region instead.
 */
export const OFFLOADED = -2;

/**
 * In a table: a block freed because it lies wholly before the sliding window of every row its
 * request will still compute (Mistral; runtime/sliding_window.ts). Never refilled: the engine
 * never reads it again. It keeps its entry so later entries keep their positions.
 */
export const EXPIRED = -3;

export class BlockPool {
  readonly numLayers: number;
  readonly blockSize: number;
  readonly layerArena: readonly number[];
  /** free[arena][block] = 1 when the block is unallocated: no holder and not cached. */
  private readonly freeMap: Uint8Array[];
  private readonly freeCount: number[];
  /** Tables holding each block. */
  private readonly refs: Uint32Array[];
  /** 1 when the prefix index keeps the block. */
  private readonly cachedMap: Uint8Array[];
  /** Cached blocks nobody holds, per arena: free for the asking once the index evicts them. */
  private readonly idleCount: number[];
  /** Frees at least `count` idle cached blocks of `arena` if it can (set by the prefix index). */
  reclaimer: ((arena: number, count: number) => void) | null = null;
  /** Per request, per layer, its blocks in position order. */
  private readonly owned = new Map<SeqId, number[][]>();

  constructor(readonly shape: PoolShape) {
    requireCount("blockSize", shape.blockSize, 1);
    requireCount("numLayers", shape.layerArena.length, 1);
    shape.blocksPerArena.forEach((n, a) => requireCount(`blocks in arena ${a}`, n, 1));
    for (const a of shape.layerArena) requireIndex("layer arena", a, shape.blocksPerArena.length);
    this.numLayers = shape.layerArena.length;
    this.blockSize = shape.blockSize;
    this.layerArena = shape.layerArena;
    this.freeMap = shape.blocksPerArena.map((n) => new Uint8Array(n).fill(1));
    this.freeCount = [...shape.blocksPerArena];
    this.refs = shape.blocksPerArena.map((n) => new Uint32Array(n));
    this.cachedMap = shape.blocksPerArena.map((n) => new Uint8Array(n));
    this.idleCount = shape.blocksPerArena.map(() => 0);
  }

  get numArenas(): number {
    return this.freeMap.length;
  }

  /** Blocks in the whole pool. */
  get total(): number {
    return this.shape.blocksPerArena.reduce((a, b) => a + b, 0);
  }

  /** Allocated blocks in the whole pool. */
  get used(): number {
    return this.total - this.freeCount.reduce((a, b) => a + b, 0);
  }

  /** Blocks needed to hold `tokens` positions. */
  blocksFor(tokens: number): number {
    requireCount("tokens", tokens, 0);
    return Math.ceil(tokens / this.blockSize);
  }

  freeIn(arena: number): number {
    requireIndex("arena", arena, this.numArenas);
    return this.freeCount[arena];
  }

  /** Blocks of `arena` an allocation may use: free ones, plus idle cached ones it can reclaim. */
  availableIn(arena: number): number {
    requireIndex("arena", arena, this.numArenas);
    return this.freeCount[arena] + (this.reclaimer ? this.idleCount[arena] : 0);
  }

  /** Blocks every layer could hold at once in the whole pool (what bounds one request's KV). */
  get blocksPerLayer(): number {
    return blocksPerLayer(this.shape);
  }

  /** Blocks every layer could still be given at once: available ones, shared by their layers. */
  get availablePerLayer(): number {
    return blocksPerLayer(this.shape, this.shape.blocksPerArena.map((_, a) => this.availableIn(a)));
  }

  /**
   * The fewest blocks every layer of some other table must give up (oldest first) so that every
   * layer of `seqId` can grow to `tokens` positions: the shortfall beyond what is available,
   * shared by each arena's layers, the most over the arenas.
   */
  missingPerLayer(seqId: SeqId, tokens: number): number {
    const layers = layersPerArena(this.layerArena, this.numArenas);
    const short = this.shortfall(seqId, tokens);
    return Math.max(
      ...short.map((n, a) => Math.ceil(Math.max(0, n - this.availableIn(a)) / layers[a])),
    );
  }

  /** Cached blocks that nobody holds, over the whole pool. */
  get idle(): number {
    return this.idleCount.reduce((a, b) => a + b, 0);
  }

  /**
   * Blocks each arena still needs so that every layer of `seqId` holds `tokens` positions, its
   * dropped blocks refilled.
   */
  shortfall(seqId: SeqId, tokens: number): number[] {
    return this.shortfallEach(seqId, new Array(this.numLayers).fill(tokens));
  }

  /**
   * Like shortfall(), with each layer's own token count (`tokens[layer]`). A table's OFFLOADED
   * entries count as held: a layer needs blocks only for the entries it lacks.
   */
  shortfallEach(seqId: SeqId, tokens: readonly number[]): number[] {
    if (tokens.length !== this.numLayers) {
      throw new RangeError(`expected ${this.numLayers} token counts, got ${tokens.length}`);
    }
    const need = new Array(this.numArenas).fill(0);
    const layers = this.owned.get(seqId);
    for (let l = 0; l < this.numLayers; l++) {
      const held = layers?.[l] ?? [];
      need[this.layerArena[l]] += Math.max(0, this.blocksFor(tokens[l]) - held.length) +
        dropsIn(held);
    }
    return need;
  }

  /** True when every layer of `seqId` could grow to its own `tokens[layer]` positions now. */
  canGrowEach(seqId: SeqId, tokens: readonly number[]): boolean {
    return this.shortfallEach(seqId, tokens).every((n, a) => n <= this.availableIn(a));
  }

  /**
   * Grows each layer of `seqId` to its own `tokens[layer]` positions (layer-wise admission gives
   * offloaded layers less than resident ones). Returns the new blocks per layer, or null (and
   * changes nothing) when some arena has too few free blocks.
   */
  growEach(seqId: SeqId, tokens: readonly number[]): number[][] | null {
    if (!this.canGrowEach(seqId, tokens)) return null;
    const added: number[][] = [];
    for (let l = 0; l < this.numLayers; l++) added.push(this.grow(seqId, l, tokens[l])!);
    return added;
  }

  /** True when every layer of `seqId` could grow to `tokens` positions now. */
  canGrowAll(seqId: SeqId, tokens: number): boolean {
    return this.canGrowEach(seqId, new Array(this.numLayers).fill(tokens));
  }

  /**
   * Grows every layer of `seqId` to `tokens` positions. Returns the new blocks per layer, or null
   * (and changes nothing) when some arena has too few free blocks.
   */
  growAll(seqId: SeqId, tokens: number): number[][] | null {
    return this.growEach(seqId, new Array(this.numLayers).fill(tokens));
  }

  /**
   * Makes `seqId` hold enough blocks on `layer` for `tokenCount` positions in total, refilling its
   * dropped blocks first. Returns the newly added block ids in position order ([] when it already
   * had enough), or null when the layer's arena has too few free blocks (nothing changed).
   */
  grow(seqId: SeqId, layer: number, tokenCount: number): number[] | null {
    this.requireLayer(layer);
    const held = this.owned.get(seqId)?.[layer] ?? [];
    const drops = dropsIn(held);
    const need = Math.max(0, this.blocksFor(tokenCount) - held.length) + drops;
    if (need <= 0) return [];
    const arena = this.layerArena[layer];
    if (need > this.availableIn(arena)) return null;
    if (need > this.freeCount[arena]) this.reclaimer?.(arena, need - this.freeCount[arena]);
    if (need > this.freeCount[arena]) return null;

    const free = this.freeMap[arena];
    const added: number[] = [];
    // Extend the last run in place while the blocks after it are free.
    if (held.length > 0 && drops === 0 && held[held.length - 1] >= 0) {
      for (
        let b = held[held.length - 1] + 1;
        b < free.length && added.length < need && free[b];
        b++
      ) {
        free[b] = 0;
        added.push(b);
      }
    }
    const rest = need - added.length;
    if (rest > 0) {
      const picked = pickRuns(free, rest);
      for (const b of picked) free[b] = 0;
      added.push(...picked);
    }
    for (const b of added) this.refs[arena][b] = 1;
    this.freeCount[arena] -= added.length;
    const table = this.layersOf(seqId)[layer];
    // Dropped entries first, where they are (the leading ones, or those after aliased ones).
    let next = 0;
    for (let i = 0; i < table.length && next < drops; i++) {
      if (table[i] === DROPPED) table[i] = added[next++];
    }
    table.push(...added.slice(drops));
    return added;
  }

  /**
   * Drops the first `count` blocks of every layer of `seqId` (the KV of its oldest positions, to
   * be recomputed: eLLM); their entries read DROPPED until grow() refills them. Returns how many
   * blocks became free.
   */
  dropLeading(seqId: SeqId, count: number): number {
    const layers = this.owned.get(seqId);
    if (!layers) return 0;
    let freed = 0;
    for (let layer = 0; layer < this.numLayers; layer++) {
      const table = layers[layer];
      const arena = this.layerArena[layer];
      for (let i = 0; i < Math.min(count, table.length); i++) {
        if (table[i] < 0) continue;
        freed += this.unhold(arena, table[i]);
        table[i] = DROPPED;
      }
    }
    return freed;
  }

  /**
   * Frees the leading blocks of every layer of `seqId` up to entry `count` (the positions before
   * its sliding window); their entries read EXPIRED. Returns how many entries were released (a
   * shared or cached block is released by this table but stays held or cached).
   */
  expireLeading(seqId: SeqId, count: number): number {
    const layers = this.owned.get(seqId);
    if (!layers) return 0;
    let released = 0;
    for (let layer = 0; layer < this.numLayers; layer++) {
      const table = layers[layer];
      const arena = this.layerArena[layer];
      for (let i = 0; i < Math.min(count, table.length); i++) {
        if (table[i] === EXPIRED) continue;
        if (table[i] < 0) throw new Error(`expire: entry ${i} of layer ${layer} holds no block`);
        this.unhold(arena, table[i]);
        table[i] = EXPIRED;
        released++;
      }
    }
    return released;
  }

  /** Leading EXPIRED entries of `seqId`'s tables (the same on every layer). */
  expiredOf(seqId: SeqId): number {
    const table = this.owned.get(seqId)?.[0] ?? [];
    let n = 0;
    while (n < table.length && table[n] === EXPIRED) n++;
    return n;
  }

  /**
   * eLLM's token-wise caching (runtime/token_cached.ts): gives the first `count` entries of every
   * layer of `seqId`, which must read DROPPED, the same `count` new blocks, held once per layer.
   * Every layer then writes its KV for those positions over the last layer's, in the step that
   * reads it. Needs every layer in one arena. Returns the blocks, or null (nothing changed) when
   * too few are free.
   */
  alias(seqId: SeqId, count: number): number[] | null {
    if (this.numArenas !== 1) throw new Error("aliased blocks need every layer in one arena");
    const layers = this.layersOf(seqId);
    if (layers.some((t) => t.length < count || t.slice(0, count).some((b) => b !== DROPPED))) {
      throw new Error(`alias: the first ${count} entries of ${seqId} are not all dropped`);
    }
    if (count > this.freeCount[0]) this.reclaimer?.(0, count - this.freeCount[0]);
    if (count > this.freeCount[0]) return null;
    const blocks = pickRuns(this.freeMap[0], count);
    for (const b of blocks) {
      this.freeMap[0][b] = 0;
      this.refs[0][b] = this.numLayers;
    }
    this.freeCount[0] -= count;
    for (const table of layers) table.splice(0, count, ...blocks);
    return blocks;
  }

  /**
   * Frees the blocks at indices [from, to) of `seqId`'s table on `layer`, whose KV is now in the
   * host tier: their entries read OFFLOADED. Returns how many blocks became free.
   */
  offload(seqId: SeqId, layer: number, from: number, to: number): number {
    this.requireLayer(layer);
    const table = this.owned.get(seqId)?.[layer] ?? [];
    if (from < 0 || to > table.length) {
      throw new RangeError(`offload ${from}..${to} is outside a table of ${table.length} blocks`);
    }
    let freed = 0;
    for (let i = from; i < to; i++) {
      if (table[i] < 0) throw new Error(`entry ${i} of layer ${layer} holds no block`);
      freed += this.unhold(this.layerArena[layer], table[i]);
      table[i] = OFFLOADED;
    }
    return freed;
  }

  /** OFFLOADED entries of `seqId`'s table on `layer` (blocks it holds only on the host). */
  offloadedOn(seqId: SeqId, layer: number): number {
    return (this.owned.get(seqId)?.[layer] ?? []).filter((b) => b === OFFLOADED).length;
  }

  /**
   * Gives every OFFLOADED entry of `seqId`'s table on `layer` a device block again (the caller
   * copies the KV in). Returns the new blocks with their indices, or null (nothing changed) when
   * the arena is short.
   */
  restore(seqId: SeqId, layer: number): { index: number; block: number }[] | null {
    this.requireLayer(layer);
    const table = this.owned.get(seqId)?.[layer] ?? [];
    const indices = table.flatMap((b, i) => b === OFFLOADED ? [i] : []);
    if (indices.length === 0) return [];
    const arena = this.layerArena[layer];
    if (indices.length > this.availableIn(arena)) return null;
    if (indices.length > this.freeCount[arena]) {
      this.reclaimer?.(arena, indices.length - this.freeCount[arena]);
    }
    if (indices.length > this.freeCount[arena]) return null;
    const picked = pickRuns(this.freeMap[arena], indices.length);
    const restored = indices.map((index, i) => {
      const block = picked[i];
      this.freeMap[arena][block] = 0;
      this.refs[arena][block] = 1;
      table[index] = block;
      return { index, block };
    });
    this.freeCount[arena] -= picked.length;
    return restored;
  }

  /**
   * Appends blocks another table already holds, or the prefix index caches, to `seqId`'s table on
   * `layer` (they must be full: shared blocks are never written again).
   */
  share(seqId: SeqId, layer: number, blocks: readonly number[]): void {
    this.requireLayer(layer);
    const arena = this.layerArena[layer];
    for (const b of blocks) {
      requireIndex("block", b, this.freeMap[arena].length);
      if (this.refs[arena][b] === 0 && !this.cachedMap[arena][b]) {
        throw new Error(`block ${b} of arena ${arena} is free: nothing to share`);
      }
    }
    for (const b of blocks) {
      if (this.refs[arena][b]++ === 0) this.idleCount[arena]--;
    }
    this.layersOf(seqId)[layer].push(...blocks);
  }

  /** Marks a held block as cached: it outlives its holders until uncache(). */
  cache(layer: number, block: number): void {
    const arena = this.layerArena[layer];
    if (this.refs[arena][block] === 0) {
      throw new Error(`block ${block} of arena ${arena} is not held`);
    }
    this.cachedMap[arena][block] = 1;
  }

  /** Drops the cache's hold on a block; an idle one becomes free. */
  uncache(layer: number, block: number): void {
    const arena = this.layerArena[layer];
    if (!this.cachedMap[arena][block]) return;
    this.cachedMap[arena][block] = 0;
    if (this.refs[arena][block] === 0) {
      this.idleCount[arena]--;
      this.freeMap[arena][block] = 1;
      this.freeCount[arena]++;
    }
  }

  /** Tables holding `block` of `layer`'s arena (0 when free or idle). */
  holders(layer: number, block: number): number {
    return this.refs[this.layerArena[layer]][block];
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

  /** Blocks `seqId` holds over all layers. */
  heldBy(seqId: SeqId): number {
    return (this.owned.get(seqId) ?? []).reduce(
      (n, blocks) => n + blocks.filter((b) => b >= 0).length,
      0,
    );
  }

  /** Number of maximal runs of consecutive block ids in `seqId`'s table on `layer`. */
  runsOf(seqId: SeqId, layer: number): number {
    const blocks = this.table(seqId, layer);
    let runs = 0;
    for (let i = 0; i < blocks.length; i++) if (i === 0 || blocks[i] !== blocks[i - 1] + 1) runs++;
    return runs;
  }

  /** Requests holding at least one block. */
  sequences(): SeqId[] {
    return [...this.owned.keys()];
  }

  /** Drops the table's hold on each block; returns how many blocks became free. */
  private freeLayer(layers: number[][], layer: number): number {
    const blocks = layers[layer];
    const arena = this.layerArena[layer];
    let freed = 0;
    for (const b of blocks) if (b >= 0) freed += this.unhold(arena, b);
    layers[layer] = [];
    return freed;
  }

  /** Drops one table's hold on a block; 1 when that made it free. */
  private unhold(arena: number, b: number): number {
    if (this.freeMap[arena][b] || this.refs[arena][b] === 0) {
      throw new Error(`block ${b} of arena ${arena} freed twice`);
    }
    if (--this.refs[arena][b] > 0) return 0;
    if (this.cachedMap[arena][b]) {
      this.idleCount[arena]++;
      return 0;
    }
    this.freeMap[arena][b] = 1;
    this.freeCount[arena]++;
    return 1;
  }

  private layersOf(seqId: SeqId): number[][] {
    let layers = this.owned.get(seqId);
    if (!layers) this.owned.set(seqId, layers = Array.from({ length: this.numLayers }, () => []));
    return layers;
  }

  private requireLayer(layer: number): void {
    requireIndex("layer", layer, this.numLayers);
  }
}

/**
 * `count` free blocks (count <= free blocks): the lowest-addressed run that holds them all, else
 * pieces from the largest runs (ties: lowest address), returned in address order per piece.
 */
function pickRuns(free: Uint8Array, count: number): number[] {
  const runs: { start: number; length: number }[] = [];
  for (let b = 0; b < free.length;) {
    if (!free[b]) {
      b++;
      continue;
    }
    const start = b;
    while (b < free.length && free[b]) b++;
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

function requireCount(name: string, value: number, min: number): void {
  if (!Number.isInteger(value) || value < min) {
    throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
  }
}

function requireIndex(name: string, value: number, bound: number): void {
  if (!Number.isInteger(value) || value < 0 || value >= bound) {
    throw new RangeError(`${name} ${value} is out of range 0..${bound - 1}`);
  }
}

function range(start: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => start + i);
}

/** DROPPED entries of a table: its oldest, or (token-wise caching) those after aliased ones. */
function dropsIn(table: readonly number[]): number {
  return table.reduce((n, b) => n + (b === DROPPED ? 1 : 0), 0);
}
