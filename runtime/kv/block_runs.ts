// FastSwitch's block groups: allocation favours contiguous runs, so that moving a request's KV
// between tiers is a few large copies rather than many small ones:
//   - a growing table first takes the blocks right after its last block, while they are free
//     (kv/block_pool.ts's grow);
//   - the rest comes from the lowest-addressed free run that holds it whole;
//   - only when no single run is large enough is it split, largest runs first (fewest pieces).

/**
 * Which blocks of an arena are free, with the lengths of its free runs kept in a segment tree:
 * finding the lowest run that holds `count` blocks takes O(log n) instead of a scan, for pools of
 * a GPU's size (10^5–10^6 blocks) whose allocations would otherwise scan them on every growth.
 */
export class FreeBlocks {
  /** 1: the block is free. Read it directly; change it through set(). */
  readonly map: Uint8Array;
  private readonly leaves: number;
  // Per tree node: the free run at its start, at its end, and its longest (in blocks).
  private readonly head: Int32Array;
  private readonly tail: Int32Array;
  private readonly longest: Int32Array;

  constructor(readonly size: number) {
    this.map = new Uint8Array(size).fill(1);
    this.leaves = 1 << Math.ceil(Math.log2(Math.max(1, size)));
    this.head = new Int32Array(2 * this.leaves);
    this.tail = new Int32Array(2 * this.leaves);
    this.longest = new Int32Array(2 * this.leaves);
    for (let b = 0; b < size; b++) this.setLeaf(b, 1);
    for (let node = this.leaves - 1; node >= 1; node--) this.combine(node);
  }

  set(block: number, free: boolean): void {
    const v = free ? 1 : 0;
    if (this.map[block] === v) return;
    this.map[block] = v;
    this.setLeaf(block, v);
    for (let node = (this.leaves + block) >> 1; node >= 1; node >>= 1) this.combine(node);
  }

  /** The first block of the lowest-addressed maximal free run of at least `count`, or -1. */
  lowestRun(count: number): number {
    if (this.longest[1] < count) return -1;
    let node = 1, width = this.leaves, start = 0;
    while (node < this.leaves) {
      const left = 2 * node, half = width / 2;
      if (this.longest[left] >= count) {
        node = left;
      } else if (this.tail[left] + this.head[left + 1] >= count) {
        return start + half - this.tail[left];
      } else {
        node = left + 1;
        start += half;
      }
      width = half;
    }
    return start;
  }

  private setLeaf(block: number, v: number): void {
    const leaf = this.leaves + block;
    this.head[leaf] = this.tail[leaf] = this.longest[leaf] = v;
  }

  private combine(node: number): void {
    const l = 2 * node, r = l + 1;
    const width = this.leaves >> (31 - Math.clz32(node) + 1); // each child's width
    this.head[node] = this.head[l] === width ? width + this.head[r] : this.head[l];
    this.tail[node] = this.tail[r] === width ? width + this.tail[l] : this.tail[r];
    this.longest[node] = Math.max(this.longest[l], this.longest[r], this.tail[l] + this.head[r]);
  }
}

/**
 * `count` free blocks (count <= free blocks): the lowest-addressed run that holds them all, else
 * pieces from the largest runs (ties: lowest address), returned in address order per piece.
 */
export function pickRuns(free: FreeBlocks, count: number): number[] {
  const whole = free.lowestRun(count);
  if (whole !== -1) return range(whole, count);
  const runs: { start: number; length: number }[] = [];
  const map = free.map;
  for (let start = map.indexOf(1); start !== -1; start = map.indexOf(1, start)) {
    const end = map.indexOf(0, start);
    runs.push({ start, length: (end === -1 ? map.length : end) - start });
    if (end === -1) break;
    start = end;
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

/** Maximal runs of consecutive block ids in a table. */
export function countRuns(blocks: readonly number[]): number {
  let runs = 0;
  for (let i = 0; i < blocks.length; i++) if (i === 0 || blocks[i] !== blocks[i - 1] + 1) runs++;
  return runs;
}

function range(start: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => start + i);
}
