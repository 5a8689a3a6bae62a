// The prefix index's eviction order (kv/prefix_eviction.ts, kv/oldest_first.ts) against the
// simple scan it replaced, on seeded random operations: every victim it names, from the device
// (each arena) and from the host tier (with and without a bound), is the scan's, ties included.

import { BlockPool } from "../../../runtime/kv/block_pool.ts";
import { OFFLOADED } from "../../../runtime/kv/offload.ts";
import { OldestFirst } from "../../../runtime/kv/oldest_first.ts";
import {
  type PrefixEntry,
  PrefixIndex,
  type PrefixMover,
} from "../../../runtime/kv/prefix_index.ts";
import { assert, assertEquals, assertStrictEquals } from "../../helpers/testing.ts";
import { rng } from "../../helpers/random.ts";

Deno.test("OldestFirst names the member of the smallest age, as a scan of its members does", () => {
  for (const seed of [1, 2, 3, 4, 5]) {
    const next = rng(seed);
    const set = new OldestFirst<number>();
    const ages = new Map<number, number>();
    const last = new Map<number, number>(); // each item's latest age, kept after it is removed
    let clock = 0;
    for (let op = 0; op < 5000; op++) {
      const item = Math.floor(next() * 50);
      if (next() < 0.4) {
        set.delete(item);
        ages.delete(item);
      } else {
        // Mostly a new age; sometimes its own latest again (no other member has that one).
        const age = next() < 0.8 ? ++clock : last.get(item) ?? ++clock;
        set.set(item, age);
        ages.set(item, age);
        last.set(item, age);
      }
      let want: number | undefined, wantAge = Infinity;
      for (const [i, a] of ages) if (a < wantAge) [want, wantAge] = [i, a];
      assertEquals([set.oldest(), set.size, set.has(item)], [want, ages.size, ages.has(item)]);
    }
  }
});

/** The scan evictOne made before kv/prefix_eviction.ts, and which kind of victim it found. */
function scanDevice(entries: Iterable<PrefixEntry>, pool: BlockPool, arena: number) {
  const idleIn = (blocks: readonly number[]) =>
    blocks.some((b, layer) => pool.layerArena[layer] === arena && pool.holders(layer, b) === 0);
  const wholly = (blocks: readonly number[]) =>
    blocks.every((b, layer) => pool.holders(layer, b) === 0);
  let fallback: PrefixEntry | null = null;
  let partly: PrefixEntry | null = null;
  for (const entry of entries) {
    if (!entry.blocks || !idleIn(entry.blocks)) continue;
    if (!wholly(entry.blocks)) {
      partly ??= entry;
      continue;
    }
    if (entry.children === 0 || unreachable(entry)) return { victim: entry, kind: "leaf" };
    fallback ??= entry;
  }
  if (fallback) return { victim: fallback, kind: "wholly" };
  return { victim: partly, kind: partly ? "partly" : "none" };
}

/** The scan evictHostOne made. */
function scanHost(entries: Iterable<PrefixEntry>, pool: BlockPool, before: PrefixEntry | null) {
  let fallback: PrefixEntry | null = null;
  let partly: PrefixEntry | null = null;
  for (const entry of entries) {
    if (entry === before) break;
    if (!entry.host) continue;
    const idle = entry.host.blocks.filter((b, layer) => pool.holders(layer, b) === 0).length;
    if (idle === 0) continue;
    if (idle < entry.host.blocks.length) {
      partly ??= entry;
      continue;
    }
    if (entry.blocks || entry.children === 0 || unreachable(entry)) {
      return { victim: entry, kind: "first" };
    }
    fallback ??= entry;
  }
  if (fallback) return { victim: fallback, kind: "wholly" };
  return { victim: partly, kind: partly ? "partly" : "none" };
}

function unreachable(entry: PrefixEntry): boolean {
  for (let e = entry.parent; e; e = e.parent) if (e.evicted) return true;
  return false;
}

/** An index that checks each victim it is about to take against the scan, and tallies kinds. */
class CheckedIndex extends PrefixIndex {
  readonly taken = new Map<string, number>();
  hostPool: BlockPool | null = null;

  constructor(readonly device: BlockPool) {
    super(device);
  }

  protected override deviceVictim(arena: number): PrefixEntry | null {
    const { victim, kind } = scanDevice(this.byAge(), this.device, arena);
    assertStrictEquals(super.deviceVictim(arena), victim);
    this.tally(`device ${kind}`);
    return victim;
  }

  protected override hostVictim(before: PrefixEntry | null): PrefixEntry | null {
    const { victim, kind } = scanHost(this.byAge(), this.hostPool!, before);
    assertStrictEquals(super.hostVictim(before), victim);
    this.tally(`host ${kind}${before ? " before" : ""}`);
    return victim;
  }

  /** Asks for every victim there could be now, without taking any. */
  checkAll(before: PrefixEntry | null): void {
    for (let a = 0; a < this.device.numArenas; a++) {
      assertStrictEquals(super.deviceVictim(a), scanDevice(this.byAge(), this.device, a).victim);
    }
    for (const bound of [null, before]) {
      assertStrictEquals(
        super.hostVictim(bound),
        scanHost(this.byAge(), this.hostPool!, bound).victim,
      );
    }
  }

  all(): PrefixEntry[] {
    return [...this.byAge()];
  }

  private tally(kind: string): void {
    this.taken.set(kind, (this.taken.get(kind) ?? 0) + 1);
  }
}

/**
 * Requests over a few shared prefixes come and go on a device of two arenas (and one no layer
 * uses) with a host tier: they share what is cached and cache what they fill, offload layers
 * (entries partly held), copies to and from the host land late or are cancelled (host copies
 * partly read), swaps and a large request press on each tier.
 */
function randomRun(seed: number, ops: number): CheckedIndex {
  const next = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)];
  const B = 2, layers = 4;
  const device = new BlockPool({
    blocksPerArena: [40, 44, 8],
    layerArena: [0, 1, 0, 1],
    blockSize: B,
  });
  const host = new BlockPool({ blocksPerArena: [48], layerArena: [0, 0, 0, 0], blockSize: B });
  const index = new CheckedIndex(device);
  index.hostPool = host;
  // Copies out land when a step is delivered; copies in hold the host blocks they read till then.
  let outs: { copy: { landed: boolean } }[] = [];
  let reads: { entry: PrefixEntry; layer: number; id: string }[] = [];
  let readId = 0;
  const mover: PrefixMover = {
    copyOut: (_, __, copy) => outs.push({ copy }),
    copyIn: (entry) => {
      for (let layer = 0; layer < layers; layer++) {
        const id = `read-${readId++}`;
        host.share(id, layer, [entry.host!.blocks[layer]]);
        reads.push({ entry, layer, id });
      }
    },
    cancelIn: (entry, layer) => {
      for (const r of reads) if (r.entry === entry && r.layer === layer) host.release(r.id);
      reads = reads.filter((r) => r.entry !== entry || r.layer !== layer);
    },
    cancelOut: () => {},
  };
  index.attachHost(host, mover);

  const prefixes = Array.from(
    { length: 4 },
    () => Array.from({ length: 4 + Math.floor(next() * 12) }, () => Math.floor(next() * 3)),
  );
  const running = new Map<string, { tokens: number[]; entries: PrefixEntry[] }>();
  let nextId = 0;
  for (let op = 0; op < ops; op++) {
    const r = next();
    if (r < 0.35) {
      // Admit a request: share its cached prefix, grow the rest, cache what it filled.
      const id = `req-${nextId++}`;
      const tokens = [
        ...pick(prefixes),
        ...Array.from({ length: Math.floor(next() * 8) }, () => 1),
      ];
      const entries = index.acquire(id, tokens, Math.floor(next() * 20));
      if (!device.growAll(id, tokens.length)) {
        device.release(id);
        continue;
      }
      for (let i = entries.length; (i + 1) * B <= tokens.length; i++) {
        const blocks = Array.from({ length: layers }, (_, l) => device.table(id, l)[i]);
        const entry = index.insert(
          entries[i - 1] ?? null,
          tokens.slice(i * B, (i + 1) * B),
          blocks,
        );
        if (entry.blocks!.some((b, l) => b !== blocks[l])) break;
        entries.push(entry);
      }
      running.set(id, { tokens, entries });
    } else if (r < 0.6 && running.size > 0) {
      const id = pick([...running.keys()]);
      device.release(id);
      running.delete(id);
    } else if (r < 0.68 && running.size > 0) {
      // Offload one layer's leading blocks: their entries are now partly held.
      const id = pick([...running.keys()]);
      const layer = Math.floor(next() * layers);
      const table = device.table(id, layer);
      const upto = Math.floor(next() * (table.length + 1));
      if (table.slice(0, upto).every((b) => b >= 0)) device.vacate(id, layer, 0, upto, OFFLOADED);
    } else if (r < 0.78) {
      // A step is delivered: some copies out land, some reads finish.
      for (const o of outs) if (next() < 0.7) o.copy.landed = true;
      outs = outs.filter((o) => !o.copy.landed);
      for (const read of reads) if (next() < 0.5) host.release(read.id);
      reads = reads.filter((read) => host.heldBy(read.id) > 0);
    } else if (r < 0.86) {
      // A swap takes host room for a while.
      const id = `swap-${nextId++}`;
      if (host.growAll(id, B * Math.floor(1 + next() * 6))) {
        running.set(id, { tokens: [], entries: [] });
      }
    } else if (r < 0.9 && running.size > 0) {
      const swaps = [...running.keys()].filter((id) => id.startsWith("swap"));
      if (swaps.length > 0) {
        const id = pick(swaps);
        host.release(id);
        running.delete(id);
      }
    } else if (r < 0.97) {
      // A large request presses on the device, then ends.
      const id = `big-${nextId++}`;
      device.growAll(id, B * Math.floor(4 + next() * 12));
      device.release(id);
    } else if (r < 0.975) {
      index.clear();
    }
    const entries = index.all();
    index.checkAll(entries.length > 0 ? pick(entries) : null);
  }
  return index;
}

Deno.test("the prefix index evicts what the simple scan would, on random operations", () => {
  const taken = new Map<string, number>();
  for (let seed = 1; seed <= 12; seed++) {
    for (const [kind, n] of randomRun(seed, 1500).taken) {
      taken.set(kind, (taken.get(kind) ?? 0) + n);
    }
  }
  // Every kind of victim was taken, so every rule was compared.
  for (const tier of ["device", "host"]) {
    const kinds = tier === "device" ? ["leaf", "wholly", "partly"] : ["first", "wholly", "partly"];
    for (const kind of kinds) {
      assert((taken.get(`${tier} ${kind}`) ?? 0) > 0, `no ${tier} ${kind} victim: ${[...taken]}`);
    }
  }
  assert((taken.get("host first before") ?? 0) > 0, `no bounded host victim: ${[...taken]}`);
});
