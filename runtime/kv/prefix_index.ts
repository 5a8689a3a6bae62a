// The prefix cache's index: full KV blocks named by the tokens that produced them, so a request
// whose prompt starts the same way (a chat's next turn, a shared system prompt) shares those blocks
// instead of computing them again (vLLM's automatic prefix caching, llama.cpp's prompt cache).
//
// An entry is one token block: its tokens, its parent entry (the block before it), and where its
// KV is: a block on every layer in the device pool, a copy in the host tier, or both. Parent plus
// tokens name the whole prefix, so a block is only ever reused at the same position after the same
// tokens. Entries live in least-recently-used order. The device pool asks the index to evict idle
// entries (nobody holds their blocks) before it refuses an allocation, unreachable ones and leaves
// first, so a cached chain is cut from its end.
//
// With a host tier attached (kv/prefix_tier.ts moves the bytes), an entry the device evicts
// moves to the host when the host has room, instead of being dropped; a later match brings it back
// into fresh device blocks (copied in before the step's kernels run). The host copy stays valid
// after that (full blocks never change), so the entry is then on both tiers and a second eviction
// from the device moves nothing. The host tier evicts its entries least recently used too, before
// it refuses anyone's allocation (swaps, offloaded layers): the cache never stands in their way.

import type { BlockPool, SeqId } from "./block_pool.ts";
import { PrefixEviction } from "./prefix_eviction.ts";
import type { HostCopy, PrefixEntry } from "./prefix_entry.ts";
export type { HostCopy, PrefixEntry };

/** Moves entries' KV between the tiers, as copies in the next step; the index keeps the books. */
export interface PrefixMover {
  /** Copies `entry`'s KV from `device` blocks into `copy`; marks the copy landed when it has. */
  copyOut(entry: PrefixEntry, device: readonly number[], copy: HostCopy): void;
  /**
   * Copies `entry`'s host copy into `device` blocks before the next step's kernels; keeps its host
   * blocks held until then.
   */
  copyIn(entry: PrefixEntry, device: readonly number[]): void;
  /** Drops `entry`'s copy in to `block` of `layer` that no step carries yet (it is being freed). */
  cancelIn(entry: PrefixEntry, layer: number, block: number): void;
  /** Drops `entry`'s copies out that no step carries yet (its host blocks are freed). */
  cancelOut(entry: PrefixEntry): void;
}

export interface PrefixStats {
  entries: number;
  /** Blocks (per layer) found in the cache by lookups, on either tier. */
  hitBlocks: number;
  /** Of those, blocks found only in the host tier and copied back in. */
  hostHitBlocks: number;
  /** Blocks (per layer) lookups asked for. */
  lookupBlocks: number;
  /** Entries dropped from the cache. */
  evictions: number;
  /** Entries the device evicted that moved to the host tier. */
  demotions: number;
  /** Blocks (over all layers) the cache keeps on the device, held by requests or idle. */
  deviceBlocks: number;
  /** Blocks (over all layers) the cache keeps in the host tier. */
  hostBlocks: number;
}

/** Table ids of no request's: what a lookup pins while it works; a demotion's new host blocks. */
const PIN: SeqId = "prefix-pin";
const DEMOTE: SeqId = "prefix-demote";

let nextEntryId = 1;

export class PrefixIndex {
  /** By key, in least-recently-used order (a Map keeps insertion order; a touch re-inserts). */
  private readonly entries = new Map<string, PrefixEntry>();
  private readonly ids = new WeakMap<PrefixEntry, number>();
  /** Which entry evictOne and evictHostOne take next, without scanning `entries`. */
  private readonly order: PrefixEviction;
  private host: { pool: BlockPool; mover: PrefixMover } | null = null;
  private hitBlocks = 0;
  private hostHitBlocks = 0;
  private lookupBlocks = 0;
  private evictions = 0;
  private demotions = 0;

  constructor(private readonly pool: BlockPool) {
    this.order = new PrefixEviction(pool);
    pool.reclaimer = (arena, count) => this.reclaim(arena, count);
  }

  /**
   * Gives the cache a host tier: entries the device evicts move there while it has room, and the
   * host pool evicts idle ones before it refuses an allocation.
   */
  attachHost(pool: BlockPool, mover: PrefixMover): void {
    if (pool.numLayers !== this.pool.numLayers || pool.blockSize !== this.pool.blockSize) {
      throw new Error("the host tier must have the device pool's layers and block size");
    }
    this.host = { pool, mover };
    this.order.attachHost(pool);
    pool.reclaimer = (arena, count) => this.reclaimHost(arena, count);
  }

  /**
   * Shares the cached blocks that cover `tokens` from the start, one per full block, at most
   * `maxBlocks`, into `seqId`'s (empty) tables, in position order; returns their entries. An entry
   * only in the host tier gets fresh device blocks of `seqId`'s, copied in before the next step's
   * kernels, and stays cached in both tiers. Stops at the first block it cannot give.
   */
  acquire(seqId: SeqId, tokens: readonly number[], maxBlocks: number): PrefixEntry[] {
    if (this.pool.heldBy(seqId) > 0) throw new Error(`${seqId} already holds blocks`);
    const B = this.pool.blockSize;
    const want = Math.min(maxBlocks, Math.floor(tokens.length / B));
    const found = this.match(tokens, want);
    // Pinned, what they hold stays while device blocks are found for those only on the host.
    for (const e of found) this.hold(PIN, e);
    const got: PrefixEntry[] = [];
    for (const entry of found) {
      if (entry.blocks) {
        entry.blocks.forEach((b, layer) => this.pool.share(seqId, layer, [b]));
      } else if (entry.host?.landed) {
        const added = this.pool.growAll(seqId, (got.length + 1) * B);
        if (!added) break;
        const blocks = added.map((a) => a[0]);
        blocks.forEach((b, layer) => this.pool.cache(layer, b));
        entry.blocks = blocks;
        this.order.sync(entry);
        this.host!.mover.copyIn(entry, blocks);
        this.hostHitBlocks++;
      } else break; // its copy to the host is still on its way
      got.push(entry);
    }
    this.pool.release(PIN);
    this.host?.pool.release(PIN);
    this.lookupBlocks += want;
    this.hitBlocks += got.length;
    return got;
  }

  /**
   * Records that `blocks` (one per layer) hold the KV of `tokens` (one full block) after `parent`.
   * If that prefix is cached already, the existing entry wins and is returned; the caller's blocks
   * stay its own, unless the entry was only in the host tier: then they become its device copy.
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
      if (!existing.blocks) {
        blocks.forEach((b, layer) => this.pool.cache(layer, b));
        existing.blocks = [...blocks];
        this.order.sync(existing);
      }
      this.touch(existing);
      return existing;
    }
    const entry: PrefixEntry = {
      key,
      parent,
      blocks: [...blocks],
      host: null,
      children: 0,
      evicted: false,
    };
    this.ids.set(entry, nextEntryId++);
    blocks.forEach((b, layer) => this.pool.cache(layer, b));
    if (parent) parent.children++;
    this.entries.set(key, entry);
    this.order.added(entry);
    return entry;
  }

  stats(): PrefixStats {
    let deviceBlocks = 0, hostBlocks = 0;
    for (const e of this.entries.values()) {
      deviceBlocks += e.blocks?.length ?? 0;
      hostBlocks += e.host?.blocks.length ?? 0;
    }
    return {
      entries: this.entries.size,
      hitBlocks: this.hitBlocks,
      hostHitBlocks: this.hostHitBlocks,
      lookupBlocks: this.lookupBlocks,
      evictions: this.evictions,
      demotions: this.demotions,
      deviceBlocks,
      hostBlocks,
    };
  }

  /**
   * Evicts every entry whose blocks nobody holds, from both tiers (all of them once every request
   * has ended).
   */
  clear(): void {
    for (const entry of [...this.entries.values()]) {
      const blocks = entry.blocks;
      if (blocks?.every((b, layer) => this.pool.holders(layer, b) === 0)) {
        this.leaveDevice(entry, false);
      }
      if (entry.host && this.hostIdle(entry)) this.dropHost(entry);
    }
  }

  /**
   * The cached entries that cover `tokens` from the start, one per full block, at most `count`;
   * touched as most recently used.
   */
  private match(tokens: readonly number[], count: number): PrefixEntry[] {
    const B = this.pool.blockSize;
    const found: PrefixEntry[] = [];
    let parent: PrefixEntry | null = null;
    for (let i = 0; i < count; i++) {
      const entry = this.entries.get(this.keyOf(parent, tokens.slice(i * B, (i + 1) * B)));
      if (!entry) break;
      found.push(entry);
      parent = entry;
    }
    for (const e of found) this.touch(e);
    return found;
  }

  /** Makes `seqId` hold what `entry` keeps on each tier (so that no eviction takes it). */
  private hold(seqId: SeqId, entry: PrefixEntry): void {
    entry.blocks?.forEach((b, layer) => this.pool.share(seqId, layer, [b]));
    entry.host?.blocks.forEach((b, layer) => this.host!.pool.share(seqId, layer, [b]));
  }

  /** Evicts idle entries, least recently used leaves first, till `count` of `arena`'s are free. */
  private reclaim(arena: number, count: number): void {
    const start = this.pool.freeIn(arena);
    while (this.pool.freeIn(arena) - start < count && this.evictOne(arena));
  }

  /**
   * Evicts one entry with an idle device block in `arena`: preferably one nobody holds any block of
   * and that no lookup can reach any more or nothing is chained after, least recently used first;
   * else any wholly idle one; else one whose other layers are still held (a request offloaded only
   * some of its layers): its held blocks stay with their holders, uncached. Every idle cached
   * block is thus reclaimable, as the pool assumes. The entry moves to the host tier if it can.
   */
  private evictOne(arena: number): boolean {
    const victim = this.deviceVictim(arena);
    return victim ? this.leaveDevice(victim, true) : false;
  }

  /** The entry evictOne takes (kv/prefix_eviction.ts keeps them in that order). */
  protected deviceVictim(arena: number): PrefixEntry | null {
    return this.order.deviceVictim(arena);
  }

  /**
   * Frees `entry`'s device blocks (those still held stay with their holders), first copying them
   * to the host tier when `demote` and it has no copy there yet; an entry left on neither tier is
   * dropped.
   */
  private leaveDevice(entry: PrefixEntry, demote: boolean): true {
    const blocks = entry.blocks!;
    entry.blocks = null;
    this.order.sync(entry);
    blocks.forEach((b, layer) => {
      // A copy in that has not run yet must not land in a block someone else may now get.
      if (this.pool.holders(layer, b) === 0) this.host?.mover.cancelIn(entry, layer, b);
    });
    if (demote && !entry.host && !this.order.unreachable(entry)) {
      entry.host = this.demote(entry, blocks);
      this.order.sync(entry);
    }
    blocks.forEach((b, layer) => this.pool.uncache(layer, b));
    if (!entry.host) this.drop(entry);
    return true;
  }

  /**
   * Gives `entry` host blocks and copies `blocks` into them (the device may reuse them in the same
   * step: copies out run first). Makes room by evicting only host entries used less recently than
   * it; null when there is none to make.
   */
  private demote(entry: PrefixEntry, blocks: readonly number[]): HostCopy | null {
    if (!this.host) return null;
    const { pool, mover } = this.host;
    const short = () =>
      pool.shortfall(DEMOTE, pool.blockSize).some((n, arena) => n > pool.freeIn(arena));
    while (short() && this.evictHostOne(entry));
    if (short()) return null;
    const copy: HostCopy = {
      blocks: pool.growAll(DEMOTE, pool.blockSize)!.map((a) => a[0]),
      landed: false,
    };
    copy.blocks.forEach((b, layer) => pool.cache(layer, b));
    pool.release(DEMOTE);
    mover.copyOut(entry, blocks, copy);
    this.demotions++;
    return copy;
  }

  /** Evicts idle host copies, least recently used first, till `count` of `arena`'s are free. */
  private reclaimHost(arena: number, count: number): void {
    const pool = this.host!.pool;
    const start = pool.freeIn(arena);
    while (pool.freeIn(arena) - start < count && this.evictHostOne(null));
  }

  /**
   * Drops one host copy with an idle block, least recently used first and, when `before` is given,
   * of an entry used less recently than it: preferably a wholly idle one whose entry stays on the
   * device, or that nothing is chained after or no lookup reaches; else any wholly idle one; else
   * one a copy in still reads some layers of (those blocks stay held until its step). Every idle
   * cached host block is thus reclaimable, as the host pool assumes.
   */
  private evictHostOne(before: PrefixEntry | null): boolean {
    const victim = this.hostVictim(before);
    if (victim) this.dropHost(victim);
    return victim !== null;
  }

  /** The entry evictHostOne takes (kv/prefix_eviction.ts keeps them in that order). */
  protected hostVictim(before: PrefixEntry | null): PrefixEntry | null {
    return this.order.hostVictim(before);
  }

  /** Every entry, least recently used first. */
  protected byAge(): IterableIterator<PrefixEntry> {
    return this.entries.values();
  }

  /** True when nobody holds `entry`'s host blocks (a copy in reading them holds them). */
  private hostIdle(entry: PrefixEntry): boolean {
    const pool = this.host!.pool;
    return entry.host!.blocks.every((b, layer) => pool.holders(layer, b) === 0);
  }

  /** Frees `entry`'s host copy (a copy out still waiting for its step goes too). */
  private dropHost(entry: PrefixEntry): void {
    const { pool, mover } = this.host!;
    const copy = entry.host!;
    entry.host = null;
    this.order.sync(entry);
    mover.cancelOut(entry);
    copy.blocks.forEach((b, layer) => pool.uncache(layer, b));
    if (!entry.blocks) this.drop(entry);
  }

  /** Forgets an entry that is on neither tier any more. */
  private drop(entry: PrefixEntry): void {
    this.entries.delete(entry.key);
    entry.evicted = true;
    if (entry.parent) entry.parent.children--;
    this.order.dropped(entry);
    this.evictions++;
  }

  private touch(entry: PrefixEntry): void {
    this.entries.delete(entry.key);
    this.entries.set(entry.key, entry);
    this.order.touched(entry);
  }

  private keyOf(parent: PrefixEntry | null, tokens: readonly number[]): string {
    return `${parent ? this.ids.get(parent) : 0}:${tokens.join(",")}`;
  }
}
