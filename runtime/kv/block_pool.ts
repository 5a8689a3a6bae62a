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
// A table entry may hold no block, keeping its position: VACANT ones (vacant.ts), which grow()
// gives a block again, or ones a caller marks with a negative number of its own, which grow()
// leaves alone (what a mark means is its caller's: kv/offload.ts, sliding_window.ts). Allocation
// favours contiguous runs (kv/block_runs.ts).

import { blocksPerLayer, layersPerArena, type PoolShape } from "../../engine/kv/pool_shape.ts";
import { countRuns, FreeBlocks, pickRuns } from "./block_runs.ts";
import { requireCount, requireIndex } from "./checks.ts";
import { dropsIn, VACANT } from "./vacant.ts";

export type SeqId = number | string;

export class BlockPool {
  readonly numLayers: number;
  readonly blockSize: number;
  readonly layerArena: readonly number[];
  private readonly freeMap: FreeBlocks[]; // [arena]: blocks with no holder, not cached
  private readonly freeCount: number[];
  private readonly refs: Uint32Array[]; // tables holding each block
  private readonly cachedMap: Uint8Array[]; // 1: the prefix index keeps the block
  private readonly idleCount: number[]; // cached blocks nobody holds: free once the index evicts
  /** Frees at least `count` idle cached blocks of `arena` if it can (set by the prefix index). */
  reclaimer: ((arena: number, count: number) => void) | null = null;
  /** Told when a cached block goes idle, or is held again (the prefix index orders evictions). */
  onIdle: ((arena: number, block: number, idle: boolean) => void) | null = null;
  private readonly owned = new Map<SeqId, number[][]>(); // per request, per layer, its blocks

  constructor(readonly shape: PoolShape) {
    requireCount("blockSize", shape.blockSize, 1);
    requireCount("numLayers", shape.layerArena.length, 1);
    shape.blocksPerArena.forEach((n, a) => requireCount(`blocks in arena ${a}`, n, 1));
    for (const a of shape.layerArena) requireIndex("layer arena", a, shape.blocksPerArena.length);
    this.numLayers = shape.layerArena.length;
    this.blockSize = shape.blockSize;
    this.layerArena = shape.layerArena;
    this.freeMap = shape.blocksPerArena.map((n) => new FreeBlocks(n));
    this.freeCount = [...shape.blocksPerArena];
    this.refs = shape.blocksPerArena.map((n) => new Uint32Array(n));
    this.cachedMap = shape.blocksPerArena.map((n) => new Uint8Array(n));
    this.idleCount = shape.blocksPerArena.map(() => 0);
  }

  get numArenas(): number {
    return this.freeMap.length;
  }
  /** Blocks in the whole pool, and those allocated. */
  get total(): number {
    return this.shape.blocksPerArena.reduce((a, b) => a + b, 0);
  }
  get used(): number {
    return this.total - this.freeCount.reduce((a, b) => a + b, 0);
  }

  /** Blocks needed to hold `tokens` positions. */
  blocksFor(tokens: number): number {
    requireCount("tokens", tokens, 0);
    return Math.ceil(tokens / this.blockSize);
  }

  /** Free blocks of `arena`; and those an allocation may use: free ones, plus idle cached ones it
   * can reclaim. */
  freeIn(arena: number): number {
    requireIndex("arena", arena, this.numArenas);
    return this.freeCount[arena];
  }
  availableIn(arena: number): number {
    requireIndex("arena", arena, this.numArenas);
    return this.freeCount[arena] + (this.reclaimer ? this.idleCount[arena] : 0);
  }

  /** Blocks every layer could hold at once in the whole pool (what bounds one request's KV), and
   * could still be given at once: available ones, shared by their layers. */
  get blocksPerLayer(): number {
    return blocksPerLayer(this.shape);
  }
  get availablePerLayer(): number {
    return blocksPerLayer(this.shape, this.shape.blocksPerArena.map((_, a) => this.availableIn(a)));
  }

  /**
   * The fewest blocks every layer of another table must give up so that every layer of `seqId`
   * can grow to `tokens` positions (the shortfall over each arena's layers, the most of them).
   */
  missingPerLayer(seqId: SeqId, tokens: number): number {
    const layers = layersPerArena(this.layerArena, this.numArenas);
    const short = this.shortfall(seqId, tokens);
    return Math.max(
      ...short.map((n, a) => Math.ceil(Math.max(0, n - this.availableIn(a)) / layers[a])),
    );
  }

  /** Cached blocks nobody holds, over the whole pool. */
  get idle(): number {
    return this.idleCount.reduce((a, b) => a + b, 0);
  }

  /** Blocks each arena still needs for every layer of `seqId` to hold `tokens` positions. */
  shortfall(seqId: SeqId, tokens: number): number[] {
    return this.shortfallEach(seqId, new Array(this.numLayers).fill(tokens));
  }

  /**
   * Like shortfall(), with each layer's own token count (`tokens[layer]`). VACANT entries need a
   * block; marked ones count as held.
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
   * Grows each layer of `seqId` to its own `tokens[layer]` positions: the new blocks per layer, or
   * null (nothing changed) when some arena has too few free blocks.
   */
  growEach(seqId: SeqId, tokens: readonly number[]): number[][] | null {
    if (!this.canGrowEach(seqId, tokens)) return null;
    const added: number[][] = [];
    for (let l = 0; l < this.numLayers; l++) added.push(this.grow(seqId, l, tokens[l])!);
    return added;
  }

  /** canGrowEach and growEach with every layer at `tokens` positions. */
  canGrowAll(seqId: SeqId, tokens: number): boolean {
    return this.canGrowEach(seqId, new Array(this.numLayers).fill(tokens));
  }
  growAll(seqId: SeqId, tokens: number): number[][] | null {
    return this.growEach(seqId, new Array(this.numLayers).fill(tokens));
  }

  /**
   * Makes `seqId` hold blocks on `layer` for `tokenCount` positions, its VACANT entries refilled
   * first: the new blocks in position order ([] if it had enough), or null (nothing changed) when
   * the layer's arena has too few free blocks.
   */
  grow(seqId: SeqId, layer: number, tokenCount: number): number[] | null {
    this.requireLayer(layer);
    const held = this.owned.get(seqId)?.[layer] ?? [];
    const drops = dropsIn(held);
    const need = Math.max(0, this.blocksFor(tokenCount) - held.length) + drops;
    if (need <= 0) return [];
    const arena = this.layerArena[layer];
    if (!this.reserve(arena, need)) return null;
    const free = this.freeMap[arena].map;
    const added: number[] = [];
    // Extend the last run in place while the blocks after it are free.
    if (held.length > 0 && drops === 0 && held[held.length - 1] >= 0) {
      const last = held[held.length - 1];
      for (let b = last + 1; b < free.length && added.length < need && free[b]; b++) added.push(b);
      this.take(arena, added);
    }
    added.push(...this.take(arena, pickRuns(this.freeMap[arena], need - added.length)));
    const table = this.layersOf(seqId)[layer];
    // Dropped entries first, where they are (the leading ones, or those after aliased ones).
    let next = 0;
    for (let i = 0; i < table.length && next < drops; i++) {
      if (table[i] === VACANT) table[i] = added[next++];
    }
    table.push(...added.slice(drops));
    return added;
  }

  /**
   * Frees the first `count` blocks of every layer of `seqId` (entries without one stay as they
   * are); their entries read VACANT until grow() refills them. Returns how many became free.
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
        table[i] = VACANT;
      }
    }
    return freed;
  }

  /**
   * Frees the entries of every layer of `seqId` past the first `tokens` positions' blocks, and
   * drops them from its tables (rejected drafts' KV: speculative/verify.ts). A caller's mark there
   * is an error: its owner's books would lose it. Returns how many blocks became free.
   */
  truncate(seqId: SeqId, tokens: number): number {
    const layers = this.owned.get(seqId) ?? [];
    const keep = this.blocksFor(tokens);
    if (layers.some((table) => table.slice(keep).some((b) => b < 0 && b !== VACANT))) {
      throw new Error(`truncate: ${seqId} has a caller's mark past block ${keep}`);
    }
    let freed = 0;
    layers.forEach((table, layer) => {
      for (const b of table.splice(keep)) {
        if (b >= 0) freed += this.unhold(this.layerArena[layer], b);
      }
    });
    return freed;
  }

  /**
   * Releases the blocks of every layer of `seqId` up to entry `count`; their entries read `mark`.
   * Returns how many entries were released (a shared or cached block is released by this table
   * but stays held or cached).
   */
  releaseLeading(seqId: SeqId, count: number, mark: number): number {
    const layers = this.owned.get(seqId);
    if (!layers) return 0;
    let released = 0;
    for (let layer = 0; layer < this.numLayers; layer++) {
      const table = layers[layer];
      const arena = this.layerArena[layer];
      for (let i = 0; i < Math.min(count, table.length); i++) {
        if (table[i] === mark) continue;
        if (table[i] < 0) throw new Error(`release: entry ${i} of layer ${layer} holds no block`);
        this.unhold(arena, table[i]);
        table[i] = mark;
        released++;
      }
    }
    return released;
  }

  /** Leading entries of `seqId`'s first table that read `mark`. */
  leading(seqId: SeqId, mark: number): number {
    const table = this.owned.get(seqId)?.[0] ?? [];
    let n = 0;
    while (n < table.length && table[n] === mark) n++;
    return n;
  }

  /**
   * Gives the first `count` entries of every layer of `seqId`, which must read VACANT, the same
   * `count` new blocks, held once per layer (runtime/token_cached.ts says why). Needs every layer
   * in one arena. Returns the blocks, or null (nothing changed) when too few are free.
   */
  alias(seqId: SeqId, count: number): number[] | null {
    if (this.numArenas !== 1) throw new Error("aliased blocks need every layer in one arena");
    const layers = this.layersOf(seqId);
    if (layers.some((t) => t.length < count || t.slice(0, count).some((b) => b !== VACANT))) {
      throw new Error(`alias: the first ${count} entries of ${seqId} are not all dropped`);
    }
    if (!this.reserve(0, count, false)) return null;
    const blocks = this.take(0, pickRuns(this.freeMap[0], count), this.numLayers);
    for (const table of layers) table.splice(0, count, ...blocks);
    return blocks;
  }

  /**
   * Frees the blocks at indices [from, to) of `seqId`'s table on `layer`: their entries read
   * `mark`, which grow() leaves alone. Returns how many blocks became free.
   */
  vacate(seqId: SeqId, layer: number, from: number, to: number, mark: number): number {
    this.requireLayer(layer);
    const table = this.owned.get(seqId)?.[layer] ?? [];
    if (from < 0 || to > table.length) {
      throw new RangeError(`vacate ${from}..${to} is outside a table of ${table.length} blocks`);
    }
    let freed = 0;
    for (let i = from; i < to; i++) {
      if (table[i] < 0) throw new Error(`entry ${i} of layer ${layer} holds no block`);
      freed += this.unhold(this.layerArena[layer], table[i]);
      table[i] = mark;
    }
    return freed;
  }

  /** Entries of `seqId`'s table on `layer` that read `mark`. */
  marked(seqId: SeqId, layer: number, mark: number): number {
    return (this.owned.get(seqId)?.[layer] ?? []).filter((b) => b === mark).length;
  }

  /**
   * Gives every entry of `seqId`'s table on `layer` that reads `mark` a block again (the caller
   * fills it). Returns the new blocks with their indices, or null (nothing changed) when the
   * arena is short.
   */
  refill(seqId: SeqId, layer: number, mark: number): { index: number; block: number }[] | null {
    this.requireLayer(layer);
    const table = this.owned.get(seqId)?.[layer] ?? [];
    const indices = table.flatMap((b, i) => b === mark ? [i] : []);
    if (indices.length === 0) return [];
    const arena = this.layerArena[layer];
    if (!this.reserve(arena, indices.length)) return null;
    const picked = this.take(arena, pickRuns(this.freeMap[arena], indices.length));
    return indices.map((index, i) => ({ index, block: table[index] = picked[i] }));
  }

  /**
   * Appends blocks another table already holds, or the prefix index caches, to `seqId`'s table on
   * `layer` (they must be full: shared blocks are never written again).
   */
  share(seqId: SeqId, layer: number, blocks: readonly number[]): void {
    this.requireLayer(layer);
    const arena = this.layerArena[layer];
    for (const b of blocks) {
      requireIndex("block", b, this.freeMap[arena].size);
      if (this.refs[arena][b] === 0 && !this.cachedMap[arena][b]) {
        throw new Error(`block ${b} of arena ${arena} is free: nothing to share`);
      }
    }
    for (const b of blocks) {
      if (this.refs[arena][b]++ > 0) continue;
      this.idleCount[arena]--;
      this.onIdle?.(arena, b, false);
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
      this.freeMap[arena].set(block, true);
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
    let n = 0;
    for (const blocks of this.owned.get(seqId) ?? []) for (const b of blocks) if (b >= 0) n++;
    return n;
  }

  /** Maximal runs of consecutive block ids in `seqId`'s table on `layer`. */
  runsOf(seqId: SeqId, layer: number): number {
    return countRuns(this.table(seqId, layer));
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

  /** Whether `count` blocks of `arena` are free, idle cached ones reclaimed for them (with
   * `whenAvailable`, only if enough are free or idle). */
  private reserve(arena: number, count: number, whenAvailable = true): boolean {
    if (whenAvailable && count > this.availableIn(arena)) return false;
    if (count > this.freeCount[arena]) this.reclaimer?.(arena, count - this.freeCount[arena]);
    return count <= this.freeCount[arena];
  }

  /** Allocates free `blocks` of `arena`, each held by `holders` tables; returns them. */
  private take(arena: number, blocks: number[], holders = 1): number[] {
    for (const b of blocks) {
      this.freeMap[arena].set(b, false);
      this.refs[arena][b] = holders;
    }
    this.freeCount[arena] -= blocks.length;
    return blocks;
  }

  /** Drops one table's hold on a block; 1 when that made it free. */
  private unhold(arena: number, b: number): number {
    if (this.freeMap[arena].map[b] || this.refs[arena][b] === 0) {
      throw new Error(`block ${b} of arena ${arena} freed twice`);
    }
    if (--this.refs[arena][b] > 0) return 0;
    if (this.cachedMap[arena][b]) {
      this.idleCount[arena]++;
      this.onIdle?.(arena, b, true);
      return 0;
    }
    this.freeMap[arena].set(b, true);
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
