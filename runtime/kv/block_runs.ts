// FastSwitch's block groups: allocation favours contiguous runs, so that moving a request's KV
// between tiers is a few large copies rather than many small ones:
//   - a growing table first takes the blocks right after its last block, while they are free
//     (kv/block_pool.ts's grow);
//   - the rest comes from the lowest-addressed free run that holds it whole;
//   - only when no single run is large enough is it split, largest runs first (fewest pieces).

/**
 * `count` free blocks (count <= free blocks): the lowest-addressed run that holds them all, else
 * pieces from the largest runs (ties: lowest address), returned in address order per piece.
 */
export function pickRuns(free: Uint8Array, count: number): number[] {
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

/** Maximal runs of consecutive block ids in a table. */
export function countRuns(blocks: readonly number[]): number {
  let runs = 0;
  for (let i = 0; i < blocks.length; i++) if (i === 0 || blocks[i] !== blocks[i - 1] + 1) runs++;
  return runs;
}

function range(start: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => start + i);
}
