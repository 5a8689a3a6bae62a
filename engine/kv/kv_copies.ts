// Turns the runtime's KV copy lists into the fewest byte-range copies, and checks them first.
//
// A copy names blocks one by one; what the GPU and the host move are byte ranges. Blocks that are
// consecutive in their arena AND consecutive on the host form one range (a FastSwitch block
// group), so a request the pool gave contiguous runs moves in a few large copies, not one per
// block. Layers that share an arena share its address space, so runs may span layers. Host runs
// never cross a host storage chunk (each chunk is its own ArrayBuffer). Pure: no GPU here.

/**
 * A copy of some of one layer's KV blocks between the device pool and the host tier. Block i of
 * `deviceBlocks` (in the layer's arena) pairs with block i of `hostBlocks`; runs that are
 * contiguous on both sides move as one copy (block groups).
 */
export interface KvCopy {
  /** "out": device → host (swap-out, write-through); "in": host → device (swap-in). */
  direction: "out" | "in";
  layer: number;
  deviceBlocks: number[];
  hostBlocks: number[];
}

/**
 * Offload distance (OrbitFlow): host blocks of one layer copied into device blocks (the prefetch
 * region) just before that layer runs in the step. Different layers may reuse the same device
 * blocks: each layer's copy lands after the layers before it have run.
 */
export interface KvPrefetch {
  layer: number;
  deviceBlocks: number[];
  hostBlocks: number[];
}

/** `blocks` blocks from device block `deviceBlock` of `arena` and host block `hostBlock` on. */
export interface CopyRun {
  direction: "out" | "in";
  arena: number;
  deviceBlock: number;
  hostBlock: number;
  blocks: number;
}

/** What a copy list is checked against. */
export interface CopyGeometry {
  /** The arena each layer's blocks live in. */
  layerArena: readonly number[];
  blocksPerArena: readonly number[];
  /** Blocks of the host tier (0: none). */
  hostBlocks: number;
}

export interface RunOptions {
  /** Host runs never cross a multiple of this many blocks (a host storage chunk). */
  hostChunkBlocks: number;
  /** false: one run per block (the benchmark's baseline). Default true. */
  coalesce?: boolean;
}

/** Copies, blocks and bytes moved in one direction. A run is two copies: its K and its V. */
export interface CopyTally {
  copies: number;
  blocks: number;
  bytes: number;
}

/**
 * Throws a RangeError naming the first bad copy: an unknown direction or layer, block lists of
 * different lengths, a block outside its arena or the host tier, a device block written twice by
 * "in" copies or a host block written twice by "out" copies, or an "in" copy reading a host block
 * that `pendingHost` says an earlier "out" copy has not filled yet (or that this list fills).
 */
export function checkCopies(
  copies: readonly KvCopy[],
  geo: CopyGeometry,
  pendingHost: (block: number) => boolean = () => false,
): void {
  const deviceTargets = new Set<string>();
  const hostTargets = new Set<number>();
  copies.forEach((c, i) => {
    const what = `KV copy ${i} (${c.direction}, layer ${c.layer})`;
    if (c.direction !== "out" && c.direction !== "in") {
      throw new RangeError(`KV copy ${i}: direction must be "out" or "in", got ${c.direction}`);
    }
    if (geo.hostBlocks === 0) throw new RangeError(`${what}: the engine has no host KV tier`);
    requireIndex(`${what}: layer`, c.layer, geo.layerArena.length);
    if (c.deviceBlocks.length !== c.hostBlocks.length) {
      throw new RangeError(
        `${what}: ${c.deviceBlocks.length} device blocks but ${c.hostBlocks.length} host blocks`,
      );
    }
    const arena = geo.layerArena[c.layer];
    c.deviceBlocks.forEach((d, j) => {
      requireIndex(`${what}: device block`, d, geo.blocksPerArena[arena]);
      const h = c.hostBlocks[j];
      requireIndex(`${what}: host block`, h, geo.hostBlocks);
      if (c.direction === "in") {
        if (!claim(deviceTargets, `${arena}:${d}`)) {
          throw new RangeError(`${what}: device block ${d} of arena ${arena} is written twice`);
        }
        if (pendingHost(h)) {
          throw new RangeError(
            `${what}: host block ${h} is still being filled by an "out" copy; wait for that ` +
              `step's records`,
          );
        }
      } else if (!claim(hostTargets, h)) {
        throw new RangeError(`${what}: host block ${h} is written twice`);
      }
    });
  });
  // An "in" copy must not read what this list's own "out" copies are about to write.
  copies.forEach((c, i) => {
    if (c.direction !== "in") return;
    const h = c.hostBlocks.find((b) => hostTargets.has(b));
    if (h !== undefined) {
      throw new RangeError(
        `KV copy ${i} (in, layer ${c.layer}): host block ${h} is filled by an "out" copy of the ` +
          `same step; wait for that step's records`,
      );
    }
  });
}

/**
 * Throws a RangeError naming the first bad prefetch: an unknown layer, lists of different lengths,
 * a block out of range, a device block written twice before one layer, or a host block that an
 * "out" copy has not filled yet (`pendingHost`, or an "out" copy of the same step).
 */
export function checkPrefetches(
  prefetches: readonly KvPrefetch[],
  geo: CopyGeometry,
  pendingHost: (block: number) => boolean,
): void {
  const targets = new Set<string>();
  prefetches.forEach((p, i) => {
    const what = `KV prefetch ${i} (layer ${p.layer})`;
    if (geo.hostBlocks === 0) throw new RangeError(`${what}: the engine has no host KV tier`);
    requireIndex(`${what}: layer`, p.layer, geo.layerArena.length);
    if (p.deviceBlocks.length !== p.hostBlocks.length) {
      throw new RangeError(
        `${what}: ${p.deviceBlocks.length} device blocks but ${p.hostBlocks.length} host blocks`,
      );
    }
    const arena = geo.layerArena[p.layer];
    p.deviceBlocks.forEach((d, j) => {
      requireIndex(`${what}: device block`, d, geo.blocksPerArena[arena]);
      const h = p.hostBlocks[j];
      requireIndex(`${what}: host block`, h, geo.hostBlocks);
      if (!claim(targets, `${p.layer}:${d}`)) {
        throw new RangeError(`${what}: device block ${d} is written twice`);
      }
      if (pendingHost(h)) {
        throw new RangeError(`${what}: host block ${h} is still being filled by an "out" copy`);
      }
    });
  });
}

/** The runs of each layer's prefetches, merged like copies in (block groups). */
export function prefetchRuns(
  prefetches: readonly KvPrefetch[],
  layerArena: readonly number[],
  opts: RunOptions,
): Map<number, CopyRun[]> {
  const byLayer = new Map<number, CopyRun[]>();
  const layers = [...new Set(prefetches.map((p) => p.layer))].sort((a, b) => a - b);
  for (const layer of layers) {
    const copies = prefetches.filter((p) => p.layer === layer).map((p) => ({
      direction: "in" as const,
      ...p,
    }));
    byLayer.set(layer, toRuns(copies, layerArena, opts));
  }
  return byLayer;
}

/** The runs of each layer's "out" copies, per layer (copies after their layer's kernels). */
export function afterLayerRuns(
  copies: readonly KvCopy[],
  layerArena: readonly number[],
  opts: RunOptions,
): Map<number, CopyRun[]> {
  const byLayer = new Map<number, CopyRun[]>();
  const layers = [...new Set(copies.map((c) => c.layer))].sort((a, b) => a - b);
  for (const layer of layers) {
    byLayer.set(layer, toRuns(copies.filter((c) => c.layer === layer), layerArena, opts));
  }
  return byLayer;
}

/**
 * The runs that move `copies`: per direction and arena, pairs sorted by device block, merged while
 * both sides are consecutive (unless `coalesce` is false). Outs come before ins.
 */
export function toRuns(
  copies: readonly KvCopy[],
  layerArena: readonly number[],
  opts: RunOptions,
): CopyRun[] {
  const runs: CopyRun[] = [];
  for (const direction of ["out", "in"] as const) {
    const byArena = new Map<number, [number, number][]>();
    for (const c of copies) {
      if (c.direction !== direction) continue;
      const arena = layerArena[c.layer];
      if (!byArena.has(arena)) byArena.set(arena, []);
      const pairs = byArena.get(arena)!;
      c.deviceBlocks.forEach((d, i) => pairs.push([d, c.hostBlocks[i]]));
    }
    for (const [arena, pairs] of [...byArena].sort((a, b) => a[0] - b[0])) {
      if (opts.coalesce === false) {
        for (const [d, h] of pairs) runs.push(run(direction, arena, d, h));
      } else {
        runs.push(...mergePairs(direction, arena, pairs, opts.hostChunkBlocks));
      }
    }
  }
  return runs;
}

/** Copies, blocks and bytes per direction; `bytesPerBlock` is one block of K (V is the same). */
export function tally(runs: readonly CopyRun[], bytesPerBlock: number): Record<
  "out" | "in",
  CopyTally
> {
  const t = { out: emptyTally(), in: emptyTally() };
  for (const r of runs) {
    const d = t[r.direction];
    d.copies += 2;
    d.blocks += r.blocks;
    d.bytes += 2 * r.blocks * bytesPerBlock;
  }
  return t;
}

export function emptyTally(): CopyTally {
  return { copies: 0, blocks: 0, bytes: 0 };
}

function mergePairs(
  direction: "out" | "in",
  arena: number,
  pairs: [number, number][],
  hostChunkBlocks: number,
): CopyRun[] {
  pairs.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const runs: CopyRun[] = [];
  let cur: CopyRun | null = null;
  for (const [d, h] of pairs) {
    const extends_ = cur !== null && d === cur.deviceBlock + cur.blocks &&
      h === cur.hostBlock + cur.blocks && h % hostChunkBlocks !== 0;
    if (extends_) cur!.blocks++;
    else runs.push(cur = run(direction, arena, d, h));
  }
  return runs;
}

function run(direction: "out" | "in", arena: number, d: number, h: number): CopyRun {
  return { direction, arena, deviceBlock: d, hostBlock: h, blocks: 1 };
}

function claim<T>(set: Set<T>, key: T): boolean {
  if (set.has(key)) return false;
  set.add(key);
  return true;
}

function requireIndex(name: string, value: number, bound: number): void {
  if (!Number.isInteger(value) || value < 0 || value >= bound) {
    throw new RangeError(`${name} ${value} is out of range 0..${bound - 1}`);
  }
}
