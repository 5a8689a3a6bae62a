// The prefix cache's index: full KV blocks named by the tokens that produced them, so a request
// whose prompt starts the same way (a chat's next turn, a shared system prompt) shares those blocks
// instead of computing them again (vLLM's automatic prefix caching, llama.cpp's prompt cache).
//
// An entry is one token block: its tokens, its parent entry (the block before it), and the block
// holding its KV on every layer. Parent plus tokens name the whole prefix, so a block is only ever
// reused at the same position after the same tokens. Entries live in least-recently-used order;
// the pool asks the index to evict idle ones (nobody holds their blocks) before it refuses an
// allocation, unreachable ones and leaves first, so a cached chain is cut from its end.

import type { BlockPool } from "./block_pool.ts";

export interface PrefixEntry {
  readonly key: string;
  readonly parent: PrefixEntry | null;
  /** The block holding this token block's KV, per layer. */
  readonly blocks: readonly number[];
  children: number;
  /** Evicted: no lookup reaches it or anything chained after it. */
  evicted: boolean;
}

export interface PrefixStats {
  entries: number;
  /** Blocks (per layer) found in the cache by lookups. */
  hitBlocks: number;
  /** Blocks (per layer) lookups asked for. */
  lookupBlocks: number;
  evictions: number;
}

let nextEntryId = 1;

export class PrefixIndex {
  /** By key, in least-recently-used order (a Map keeps insertion order; a touch re-inserts). */
  private readonly entries = new Map<string, PrefixEntry>();
  private readonly ids = new WeakMap<PrefixEntry, number>();
  private hitBlocks = 0;
  private lookupBlocks = 0;
  private evictions = 0;

  constructor(private readonly pool: BlockPool) {
    pool.reclaimer = (arena, count) => this.reclaim(arena, count);
  }

  /**
   * The cached entries that cover `tokens` from the start, one per full block, at most
   * `maxBlocks`; touched as most recently used.
   */
  match(tokens: readonly number[], maxBlocks: number): PrefixEntry[] {
    const B = this.pool.blockSize;
    const found: PrefixEntry[] = [];
    let parent: PrefixEntry | null = null;
    const want = Math.min(maxBlocks, Math.floor(tokens.length / B));
    for (let i = 0; i < want; i++) {
      const entry = this.entries.get(this.keyOf(parent, tokens.slice(i * B, (i + 1) * B)));
      if (!entry) break;
      found.push(entry);
      parent = entry;
    }
    this.lookupBlocks += want;
    this.hitBlocks += found.length;
    for (const e of found) this.touch(e);
    return found;
  }

  /**
   * Records that `blocks` (one per layer) hold the KV of `tokens` (one full block) after `parent`.
   * If that prefix is cached already, the existing entry wins and is returned; the caller's blocks
   * stay its own.
   */
  insert(
    parent: PrefixEntry | null,
    tokens: readonly number[],
    blocks: readonly number[],
  ): PrefixEntry {
    if (tokens.length !== this.pool.blockSize) throw new Error("only full blocks are cached");
    if (blocks.length !== this.pool.numLayers) throw new Error("one block per layer expected");
    const key = this.keyOf(parent, tokens);
    const existing = this.entries.get(key);
    if (existing) {
      this.touch(existing);
      return existing;
    }
    const entry: PrefixEntry = { key, parent, blocks: [...blocks], children: 0, evicted: false };
    this.ids.set(entry, nextEntryId++);
    blocks.forEach((b, layer) => this.pool.cache(layer, b));
    if (parent) parent.children++;
    this.entries.set(key, entry);
    return entry;
  }

  stats(): PrefixStats {
    return {
      entries: this.entries.size,
      hitBlocks: this.hitBlocks,
      lookupBlocks: this.lookupBlocks,
      evictions: this.evictions,
    };
  }

  /** Evicts every entry whose blocks nobody holds (all of them once every request has ended). */
  clear(): void {
    while (this.evictOne(null));
  }

  /** Evicts idle entries, least recently used leaves first, until `count` blocks of `arena` are free. */
  private reclaim(arena: number, count: number): void {
    const start = this.pool.freeIn(arena);
    while (this.pool.freeIn(arena) - start < count && this.evictOne(arena));
  }

  /**
   * Evicts one entry with an idle block in `arena` (null: wholly idle ones in any arena): preferably one nobody holds any block of and
   * that no lookup can reach any more or nothing is chained after, least recently used first; else
   * any wholly idle one, cutting off what is chained after it; else one whose other layers are
   * still held (a request offloaded only some of its layers): its held blocks stay with their
   * holders, uncached. Every idle cached block is thus reclaimable, as the pool assumes.
   */
  private evictOne(arena: number | null): boolean {
    const idleIn = (e: PrefixEntry) =>
      e.blocks.some((b, layer) =>
        (arena === null || this.pool.layerArena[layer] === arena) &&
        this.pool.holders(layer, b) === 0
      );
    const wholly = (e: PrefixEntry) =>
      e.blocks.every((b, layer) => this.pool.holders(layer, b) === 0);
    let fallback: PrefixEntry | null = null;
    let partly: PrefixEntry | null = null;
    for (const entry of this.entries.values()) {
      if (!idleIn(entry)) continue;
      if (!wholly(entry)) {
        if (arena !== null) partly ??= entry; // clear() evicts only what nobody holds
        continue;
      }
      if (entry.children === 0 || unreachable(entry)) return this.evict(entry);
      fallback ??= entry;
    }
    const victim = fallback ?? partly;
    return victim ? this.evict(victim) : false;
  }

  private evict(entry: PrefixEntry): true {
    this.entries.delete(entry.key);
    entry.evicted = true;
    if (entry.parent) entry.parent.children--;
    entry.blocks.forEach((b, layer) => this.pool.uncache(layer, b));
    this.evictions++;
    return true;
  }

  private touch(entry: PrefixEntry): void {
    this.entries.delete(entry.key);
    this.entries.set(entry.key, entry);
  }

  private keyOf(parent: PrefixEntry | null, tokens: readonly number[]): string {
    return `${parent ? this.ids.get(parent) : 0}:${tokens.join(",")}`;
  }
}

/** True when an entry before it in its chain was evicted: no lookup can reach it. */
function unreachable(entry: PrefixEntry): boolean {
  for (let e = entry.parent; e; e = e.parent) if (e.evicted) return true;
  return false;
}
