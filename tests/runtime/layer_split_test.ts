// LayerKV's split rule and Eq. 5 forecast (runtime/layer_split.ts) against cases worked by hand.

import {
  forecastLowest,
  forecastReserve,
  type Grower,
  layerSplit,
  type SplitInput,
} from "../../runtime/layer_split.ts";
import { candidateDistances, offloadedCount } from "../../runtime/kv/offload_pattern.ts";
import { assertEquals } from "../helpers/testing.ts";

// 4 layers: the offloader can put 0, 1, 2 or 4 of them on the host (distances 0, 4, 2, 1).
const CHOICES = candidateDistances(4).map((d) => offloadedCount(d, 4));

/** A prompt of 10 blocks a layer (3 while offloaded), 100 ms of prefill, 20 ms of copy a layer. */
function split(over: Partial<SplitInput>): number | null {
  return layerSplit({
    numLayers: 4,
    offloadChoices: CHOICES,
    residentBlocks: 10,
    offloadedBlocks: 3,
    freeBlocks: 40,
    reservedBlocks: 0,
    prefillMs: 100,
    offloadMs: (layers) => 20 * layers,
    ...over,
  });
}

Deno.test("layer split: the offloader's choices for 4 layers are 0, 1, 2 and 4 layers offloaded", () => {
  assertEquals(CHOICES, [0, 1, 2, 4]);
});

Deno.test("layer split: keeps every layer when the whole prompt fits beside the forecast", () => {
  // 4 × 10 = 40 blocks ≤ 40 free.
  assertEquals(split({}), 4);
});

Deno.test("layer split: offloads the fewest layers that fit, while their copies hide under the prefill", () => {
  // 39 free: 0 offloaded needs 40; 1 offloaded needs 3 × 10 + 3 = 33 ≤ 39, copy 20 ≤ 100 ms.
  assertEquals(split({ freeBlocks: 39 }), 3);
  // The forecast keeps 10 back: room 29; 1 offloaded (33) does not fit, 2 do (2 × 10 + 2 × 3 = 26),
  // copy 40 ≤ 100 ms.
  assertEquals(split({ freeBlocks: 39, reservedBlocks: 10 }), 2);
  // Room 12: only all 4 offloaded fit (4 × 3 = 12), copy 80 ≤ 100 ms: nothing stays.
  assertEquals(split({ freeBlocks: 12 }), 0);
});

Deno.test("layer split: waits when the split that fits would leave its copies exposed, or nothing fits", () => {
  // Room 29 needs 2 layers offloaded: 40 ms of copy over a 30 ms prefill.
  assertEquals(split({ freeBlocks: 39, reservedBlocks: 10, prefillMs: 30 }), null);
  // Room 11: even 4 offloaded layers (12 blocks) do not fit.
  assertEquals(split({ freeBlocks: 11 }), null);
  // The whole prompt fitting needs no copy at all, however slow copies are.
  assertEquals(split({ prefillMs: 1 }), 4);
});

Deno.test("layer split: without a cost model memory alone decides", () => {
  assertEquals(split({ freeBlocks: 12, prefillMs: null }), 0);
  assertEquals(split({ freeBlocks: 12, offloadMs: () => null, prefillMs: 1 }), 0);
});

Deno.test("Eq. 5 forecast: a growing request's blocks come off the free count until it finishes and releases them", () => {
  // Blocks of 4 positions; it holds 8 blocks over 2 layers for 8 positions and writes 5 more.
  // Stage 1: position 8 starts a block (−2: 18); stage 5: position 12 (−2: 16); stage 6: it
  // releases its 12 blocks (28). Lowest 16.
  const a: Grower = { held: 8, positions: 8, left: 5, blocksPerBlock: 2 };
  assertEquals(forecastLowest(20, [a], 4, 100), 16);
  assertEquals(forecastReserve(20, [a], 4, 100), 4);
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
  assertEquals(forecastReserve(20, [], 4, 100), 0);
  assertEquals(
    forecastLowest(20, [{ held: 8, positions: 8, left: 0, blocksPerBlock: 2 }], 4, 100),
    20,
  );
});

Deno.test("Eq. 5 forecast: blocks a request will take back at once come off at the first stage", () => {
  // 4 due (offloaded layers coming back) and a block (−2) at stage 1: 14; −2 at stage 5: 12;
  // stage 6 releases 16: 28.
  const a: Grower = { held: 8, positions: 8, left: 5, blocksPerBlock: 2, due: 4 };
  assertEquals(forecastLowest(20, [a], 4, 100), 12);
  // Nothing left to write: it ends at the first stage, giving back all it holds.
  assertEquals(forecastLowest(20, [{ ...a, left: 0 }], 4, 100), 20);
});
