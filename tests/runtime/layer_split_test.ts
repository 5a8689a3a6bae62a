// LayerKV's split rule, Eq. 5 forecast and relief (runtime/layer_split.ts) against cases worked by
// hand.

import {
  forecastLowest,
  type Grower,
  type Keeper,
  layerSplit,
  relieve,
  type SplitInput,
} from "../../runtime/layer_split.ts";
import { candidateDistances, offloadedCount } from "../../runtime/kv/offload_pattern.ts";
import { assertEquals } from "../helpers/testing.ts";

// 4 layers: the offloader can put 0, 1, 2 or 4 of them on the host (distances 0, 4, 2, 1).
const CHOICES = candidateDistances(4).map((d) => offloadedCount(d, 4));

/** A prompt of 10 blocks a layer (3 while offloaded), 100 ms of prefill, 20 ms of copy a layer. */
function split(over: Partial<SplitInput>) {
  return layerSplit({
    numLayers: 4,
    offloadChoices: CHOICES,
    residentBlocks: 10,
    offloadedBlocks: 3,
    freeBlocks: 40,
    prefillMs: 100,
    offloadMs: (layers) => 20 * layers,
    ...over,
  });
}

Deno.test("layer split: the offloader's choices for 4 layers are 0, 1, 2 and 4 layers offloaded", () => {
  assertEquals(CHOICES, [0, 1, 2, 4]);
});

Deno.test("layer split (§3.1.1): keeps the fewest layers whose copies hide under the prefill, however much room there is", () => {
  // All 4 offloaded copy in 80 ≤ 100 ms: x = 0, 4 × 3 = 12 blocks, though the whole prompt fits.
  assertEquals(split({}), { kept: 0, blocks: 12 });
  // 50 ms of prefill hides 2 layers' copies (40 ms), not 4 (80): x = 2, 2 × 10 + 2 × 3 = 26.
  assertEquals(split({ prefillMs: 50 }), { kept: 2, blocks: 26 });
  assertEquals(split({ prefillMs: 50, freeBlocks: 26 }), { kept: 2, blocks: 26 });
  // 10 ms hides no copy: the whole prompt stays (40 blocks).
  assertEquals(split({ prefillMs: 10 }), { kept: 4, blocks: 40 });
});

Deno.test("layer split: waits, saying what it waits for, when the split that hides its copies does not fit", () => {
  // x = 2 needs 26; offloading more to fit 25 would leave copies exposed.
  assertEquals(split({ prefillMs: 50, freeBlocks: 25 }), { kept: null, blocks: 26 });
  assertEquals(split({ prefillMs: 10, freeBlocks: 39 }), { kept: null, blocks: 40 });
  assertEquals(split({ freeBlocks: 11 }), { kept: null, blocks: 12 });
});

Deno.test("layer split: without a cost model memory alone decides, keeping the most layers that fit", () => {
  assertEquals(split({ freeBlocks: 40, prefillMs: null }), { kept: 4, blocks: 40 });
  // 1 offloaded: 3 × 10 + 3 = 33 ≤ 39.
  assertEquals(split({ freeBlocks: 39, prefillMs: null }), { kept: 3, blocks: 33 });
  assertEquals(split({ freeBlocks: 12, offloadMs: () => null }), { kept: 0, blocks: 12 });
  assertEquals(split({ freeBlocks: 11, prefillMs: null }), { kept: null, blocks: 12 });
});

Deno.test("Eq. 5 relief: the newest requests' kept layers go to the host, x/2 of each first, then all x", () => {
  const two: Keeper[] = [{ kept: 4, blocksPerLayer: 10 }, { kept: 4, blocksPerLayer: 10 }];
  // 15 short: the newest gives up half its 4 layers (20 blocks), the older keeps all.
  assertEquals(relieve(two, 15), [2, 4]);
  // 35 short: half of each (40).
  assertEquals(relieve(two, 35), [2, 2]);
  // 50 short: half of each is not enough, so the newest gives up its other 2 (60).
  assertEquals(relieve(two, 50), [0, 2]);
  // 100 short: everything, and still short: it gives what there is.
  assertEquals(relieve(two, 100), [0, 0]);
  // Nothing short: nothing moves; a request with no full block to free is passed over.
  assertEquals(relieve(two, 0), [4, 4]);
  assertEquals(relieve([{ kept: 3, blocksPerLayer: 0 }, { kept: 3, blocksPerLayer: 5 }], 4), [
    3,
    1,
  ]);
});

Deno.test("Eq. 5 forecast: a growing request's blocks come off the free count until it finishes and releases them", () => {
  // Blocks of 4 positions; it holds 8 blocks over 2 layers for 8 positions and writes 5 more.
  // Stage 1: position 8 starts a block (−2: 18); stage 5: position 12 (−2: 16); stage 6: it
  // releases its 12 blocks (28). Lowest 16.
  const a: Grower = { held: 8, positions: 8, left: 5, blocksPerBlock: 2 };
  assertEquals(forecastLowest(20, [a], 4, 100), 16);
  // Looking only 2 stages ahead sees just the first block.
  assertEquals(forecastLowest(20, [a], 4, 2), 18);
});

Deno.test("Eq. 5 forecast: one request's release funds another's growth", () => {
  const a: Grower = { held: 8, positions: 8, left: 5, blocksPerBlock: 2 };
  // Holds 4 blocks for 6 positions, writes 3 more: stage 3 takes a block (position 8), stage 4
  // releases its 6. With a: 18, 18, 16, 22, 20, 32: lowest 16.
  const b: Grower = { held: 4, positions: 6, left: 3, blocksPerBlock: 2 };
  assertEquals(forecastLowest(20, [a, b], 4, 100), 16);
  // b alone: 20, 20, 18, 24.
  assertEquals(forecastLowest(20, [b], 4, 100), 18);
});

Deno.test("Eq. 5 forecast: nothing running, or nothing left to write, keeps back nothing", () => {
  assertEquals(forecastLowest(20, [], 4, 100), 20);
  assertEquals(
    forecastLowest(20, [{ held: 8, positions: 8, left: 0, blocksPerBlock: 2 }], 4, 100),
    20,
  );
});
