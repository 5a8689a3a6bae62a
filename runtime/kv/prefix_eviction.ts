// Which prefix-cache entry the index evicts next, from the device or from the host tier, kept up
// to date as entries are used and their cached blocks go idle or are held again: finding it costs
// O(log entries) instead of a scan of every entry in least-recently-used order, which dominated
// long simulations (one scan per evicted block).
//
// The choice is the scan's, ties included (kv/prefix_index.ts says why it is what it is). Entries
// are aged by when they were last used, and each kind of candidate the scan prefers is a set by
// age (kv/oldest_first.ts); the victim is the oldest of the first kind that has one:
//
//   device, in arena a:   wholly idle and a leaf or unreachable (an entry before it was evicted);
//                         else wholly idle; else idle in a with some other layer still held.
//   host, older than a bound:  wholly idle and on the device too, a leaf or unreachable; else
//                         wholly idle; else partly idle (a copy in still reads some layers).
//
// Idle: cached, and nobody holds it. The pools tell each change of a cached block (BlockPool.onIdle);
// the index calls sync() after every change to an entry's blocks, and the other verbs as named.

import type { BlockPool } from "./block_pool.ts";
import { OldestFirst } from "./oldest_first.ts";
import type { PrefixEntry } from "./prefix_entry.ts";

/** What the sets are computed from, per entry. */
interface Books {
  age: number;
  /** An entry before it in its chain was evicted: no lookup can reach it. */
  unreachable: boolean;
  /** Entries chained right after it, still cached. */
  readonly kids: Set<PrefixEntry>;
  /** The device blocks counted below (entry.blocks when synced); idle layers per arena, in all. */
  device: readonly number[] | null;
  deviceIdle: number[];
  deviceIdleAll: number;
  /** The host blocks counted below (entry.host.blocks when synced); idle layers. */
  host: readonly number[] | null;
  hostIdle: number;
}

/** A cached block's entry, and on how many of its layers (more than one only if aliased). */
interface Owner {
  entry: PrefixEntry;
  layers: number;
}

/** One pool's cached blocks: who owns each, per arena. */
class Owners {
  private readonly byArena: Map<number, Owner>[];

  constructor(readonly pool: BlockPool) {
    this.byArena = Array.from({ length: pool.numArenas }, () => new Map());
  }

  get(arena: number, block: number): Owner | undefined {
    return this.byArena[arena].get(block);
  }

  add(entry: PrefixEntry, blocks: readonly number[]): void {
    blocks.forEach((b, layer) => {
      const owners = this.byArena[this.pool.layerArena[layer]];
      const owner = owners.get(b);
      if (owner && owner.entry !== entry) throw new Error(`block ${b} cached by two entries`);
      if (owner) owner.layers++;
      else owners.set(b, { entry, layers: 1 });
    });
  }

  remove(blocks: readonly number[]): void {
    blocks.forEach((b, layer) => this.byArena[this.pool.layerArena[layer]].delete(b));
  }
}

export class PrefixEviction {
  private readonly books = new Map<PrefixEntry, Books>();
  private clock = 0;
  private readonly device: Owners;
  private host: Owners | null = null;
  /** Arenas some layer uses: only those can have idle blocks. */
  private readonly served: boolean[];
  private readonly deviceLeaves = new OldestFirst<PrefixEntry>();
  private readonly deviceWholly = new OldestFirst<PrefixEntry>();
  private readonly devicePartly: OldestFirst<PrefixEntry>[];
  private readonly hostFirst = new OldestFirst<PrefixEntry>();
  private readonly hostWholly = new OldestFirst<PrefixEntry>();
  private readonly hostPartly = new OldestFirst<PrefixEntry>();

  constructor(pool: BlockPool) {
    this.device = new Owners(pool);
    this.served = Array.from({ length: pool.numArenas }, (_, a) => pool.layerArena.includes(a));
    this.devicePartly = this.served.map(() => new OldestFirst());
    pool.onIdle = (arena, block, idle) => this.idle(this.device, arena, block, idle);
  }

  attachHost(pool: BlockPool): void {
    const host = this.host = new Owners(pool);
    pool.onIdle = (arena, block, idle) => this.idle(host, arena, block, idle);
  }

  /** The oldest entry with an idle device block in `arena` of the kind the scan takes first. */
  deviceVictim(arena: number): PrefixEntry | null {
    if (!this.served[arena]) return null;
    return this.deviceLeaves.oldest() ?? this.deviceWholly.oldest() ??
      this.devicePartly[arena].oldest() ?? null;
  }

  /** The same for host copies, of entries used less recently than `before` when it is given. */
  hostVictim(before: PrefixEntry | null): PrefixEntry | null {
    const bound = before ? this.of(before).age : Infinity;
    for (const kind of [this.hostFirst, this.hostWholly, this.hostPartly]) {
      const oldest = kind.oldest();
      if (oldest && this.of(oldest).age < bound) return oldest;
    }
    return null;
  }

  /** True when an entry before `entry` in its chain was evicted: no lookup can reach it. */
  unreachable(entry: PrefixEntry): boolean {
    return this.of(entry).unreachable;
  }

  /** A new entry (the most recently used), chained after `entry.parent`. */
  added(entry: PrefixEntry): void {
    // A parent evicted already (a request chaining after its own entries) has no books.
    const parent = entry.parent ? this.books.get(entry.parent) : undefined;
    this.books.set(entry, {
      age: ++this.clock,
      unreachable: entry.parent !== null && (entry.parent.evicted || parent!.unreachable),
      kids: new Set(),
      device: null,
      deviceIdle: this.served.map(() => 0),
      deviceIdleAll: 0,
      host: null,
      hostIdle: 0,
    });
    if (parent) {
      parent.kids.add(entry);
      this.sort(entry.parent!);
    }
    this.sync(entry);
  }

  /** `entry` was used: it is now the most recently used. */
  touched(entry: PrefixEntry): void {
    this.of(entry).age = ++this.clock;
    this.sort(entry);
  }

  /** Counts `entry`'s blocks afresh where they changed (entry.blocks, entry.host). */
  sync(entry: PrefixEntry): void {
    const books = this.of(entry);
    if (books.device !== entry.blocks) {
      if (books.device) this.device.remove(books.device);
      books.device = entry.blocks;
      books.deviceIdle.fill(0);
      books.deviceIdleAll = 0;
      if (entry.blocks) {
        this.device.add(entry, entry.blocks);
        entry.blocks.forEach((b, layer) => {
          if (this.device.pool.holders(layer, b) > 0) return;
          books.deviceIdle[this.device.pool.layerArena[layer]]++;
          books.deviceIdleAll++;
        });
      }
    }
    const host = entry.host?.blocks ?? null;
    if (books.host !== host) {
      if (books.host) this.host!.remove(books.host);
      books.host = host;
      books.hostIdle = 0;
      if (host) {
        this.host!.add(entry, host);
        books.hostIdle = host.filter((b, layer) => this.host!.pool.holders(layer, b) === 0).length;
      }
    }
    this.sort(entry);
  }

  /**
   * `entry` left the index (on neither tier, synced): no longer a candidate, nor its parent's
   * child; what is chained after it can no longer be reached.
   */
  dropped(entry: PrefixEntry): void {
    const books = this.of(entry);
    if (books.device) this.device.remove(books.device);
    if (books.host) this.host!.remove(books.host);
    this.books.delete(entry);
    this.sort(entry);
    const parent = entry.parent ? this.books.get(entry.parent) : undefined;
    if (parent) {
      parent.kids.delete(entry);
      this.sort(entry.parent!);
    }
    // Each entry becomes unreachable once: below one that already is, all already are.
    const stack = [...books.kids];
    for (let kid = stack.pop(); kid; kid = stack.pop()) {
      const kidBooks = this.of(kid);
      if (kidBooks.unreachable) continue;
      kidBooks.unreachable = true;
      this.sort(kid);
      stack.push(...kidBooks.kids);
    }
  }

  private of(entry: PrefixEntry): Books {
    const books = this.books.get(entry);
    if (!books) throw new Error(`prefix entry ${entry.key} is not in the eviction order`);
    return books;
  }

  /** A cached block of `owners`' pool went idle or is held again. */
  private idle(owners: Owners, arena: number, block: number, idle: boolean): void {
    const owner = owners.get(arena, block);
    if (!owner) return; // no entry's any more: being uncached
    const books = this.of(owner.entry);
    const change = idle ? owner.layers : -owner.layers;
    if (owners === this.host) books.hostIdle += change;
    else {
      books.deviceIdle[arena] += change;
      books.deviceIdleAll += change;
    }
    this.sort(owner.entry);
  }

  /** Puts `entry` in the sets of the kinds it is now (none once dropped), at its age. */
  private sort(entry: PrefixEntry): void {
    const books = this.books.get(entry);
    const age = books?.age ?? 0;
    const put = (set: OldestFirst<PrefixEntry>, is: boolean) => {
      if (is) set.set(entry, age);
      else set.delete(entry);
    };
    const leafish = entry.children === 0 || (books?.unreachable ?? false);
    const onDevice = books?.device != null;
    const wholly = onDevice && books!.deviceIdleAll === books!.device!.length;
    put(this.deviceLeaves, wholly && leafish);
    put(this.deviceWholly, wholly);
    this.devicePartly.forEach((set, a) =>
      put(set, onDevice && !wholly && books!.deviceIdle[a] > 0)
    );
    const hostIdle = books?.host ? books.hostIdle : 0;
    const hostWholly = hostIdle > 0 && hostIdle === books!.host!.length;
    put(this.hostFirst, hostWholly && (onDevice || leafish));
    put(this.hostWholly, hostWholly);
    put(this.hostPartly, hostIdle > 0 && !hostWholly);
  }
}
