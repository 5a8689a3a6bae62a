// FreeBlocks finds the lowest maximal free run that holds a count, as a scan of its map would,
// after any sequence of changes, on pools of odd sizes; pickRuns falls back to the largest runs.

import { FreeBlocks, pickRuns } from "../../../runtime/kv/block_runs.ts";
import { assertEquals } from "../../helpers/testing.ts";
import { rng, testSeed } from "../../helpers/random.ts";

/** The scan FreeBlocks replaces: the first maximal run of at least `count`, or -1. */
function scanLowestRun(map: Uint8Array, count: number): number {
  for (let b = 0; b < map.length;) {
    if (!map[b]) {
      b++;
      continue;
    }
    const start = b;
    while (b < map.length && map[b]) b++;
    if (b - start >= count) return start;
  }
  return -1;
}

Deno.test("FreeBlocks: the lowest run of each length matches a scan after random changes", () => {
  const next = rng(testSeed());
  for (const size of [1, 2, 3, 7, 64, 100, 1000]) {
    const free = new FreeBlocks(size);
    for (let op = 0; op < 400; op++) {
      free.set(Math.floor(next() * size), next() < 0.45);
      for (const count of [1, 2, 3, 5, 17, size]) {
        assertEquals(
          free.lowestRun(count),
          scanLowestRun(free.map, count),
          `size ${size}, op ${op}, count ${count}`,
        );
      }
    }
  }
});

Deno.test("pickRuns: one whole run when one holds the count, else the largest runs first", () => {
  const free = new FreeBlocks(12);
  for (const b of [0, 3, 4, 8]) free.set(b, false); // runs: 1-2, 5-7, 9-11
  assertEquals(pickRuns(free, 3), [5, 6, 7]);
  assertEquals(pickRuns(free, 2), [1, 2]);
  assertEquals(pickRuns(free, 5), [5, 6, 7, 9, 10]);
});
