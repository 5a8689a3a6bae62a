// `--recompute auto`'s choice (runtime/preempt_choice.ts) against costs worked out by hand: a
// swap wins when copies are cheap, dropping it all when prefill is cheap per token, dropping the
// oldest when only a little must go; no host tier, no swap; a buffer that hides the resume makes
// the cheaper total win over the quicker resume.

import {
  choosePreemption,
  type PreemptCosts,
  preemptOptions,
  type PreemptVictim,
  prefillMs,
} from "../../runtime/preempt_choice.ts";
import { assertEquals } from "../helpers/testing.ts";

/** Blocks of 4 positions, steps of at most 8 rows; a step costs 2 + 1/row ms, a copy 1 + 0.5/block. */
const COSTS: PreemptCosts = {
  blockSize: 4,
  maxRows: 8,
  stepMs: (rows) => 2 + rows,
  copyMs: (_dir, blocks) => 1 + 0.5 * blocks,
};

/** A decoding request of 32 positions (8 blocks), nothing on the host, no buffer. */
const VICTIM: PreemptVictim = {
  computed: 32,
  target: 32,
  hostBlocks: 0,
  canSwap: true,
  dropBlocks: 0,
  slackMs: 0,
};

const scores = (v: PreemptVictim, c: PreemptCosts) =>
  Object.fromEntries(preemptOptions(v, c).map((o) => [o.kind, o.scoreMs]));

Deno.test("prefillMs: full steps of maxRows, then the rest", () => {
  assertEquals(prefillMs(0, 8, COSTS.stepMs), 0);
  assertEquals(prefillMs(5, 8, COSTS.stepMs), 7);
  assertEquals(prefillMs(8, 8, COSTS.stepMs), 10);
  assertEquals(prefillMs(17, 8, COSTS.stepMs), 10 + 10 + 3);
});

Deno.test("cheap copies: the swap wins", () => {
  // Drop all: 32 rows = 4 steps of 10 ms, paid at resume and stalled for: 40 + 40.
  // Swap: 8 blocks out (5 ms) now; at resume 8 blocks in (5 ms) and the last position (3 ms).
  assertEquals(scores(VICTIM, COSTS), { dropAll: 80, swap: 5 + 8 + 8 });
  const best = choosePreemption(VICTIM, COSTS);
  assertEquals([best.kind, best.nowMs, best.resumeMs], ["swap", 5, 8]);
});

Deno.test("cheap prefill per token: dropping it all wins", () => {
  const cheapRows = { ...COSTS, stepMs: (rows: number) => 0.5 + 0.01 * rows, copyMs: () => 50 };
  // Drop all: 4 steps of 0.58 ms = 2.32, twice. Swap: 50 out; 50 in + 0.51, twice.
  const s = scores(VICTIM, cheapRows);
  assertEquals([s.dropAll.toFixed(2), s.swap.toFixed(2)], ["4.64", "151.02"]);
  assertEquals(choosePreemption(VICTIM, cheapRows).kind, "dropAll");
});

Deno.test("a little to free: dropping the oldest wins; more to free: the swap", () => {
  // One block: its 4 positions and the last one computed again, 5 rows (7 ms), twice.
  const one = { ...VICTIM, dropBlocks: 1 };
  assertEquals(scores(one, COSTS).dropOldest, 14);
  assertEquals(choosePreemption(one, COSTS), {
    kind: "dropOldest",
    blocks: 1,
    nowMs: 0,
    resumeMs: 7,
    scoreMs: 14,
  });
  // Three blocks: 13 rows = 10 + 7 ms, twice, against the swap's 21.
  const three = { ...VICTIM, dropBlocks: 3 };
  assertEquals(scores(three, COSTS).dropOldest, 34);
  assertEquals(choosePreemption(three, COSTS).kind, "swap");
});

Deno.test("no host tier (or no room in it): no swap, however cheap", () => {
  const noHost = { ...VICTIM, canSwap: false };
  assertEquals(preemptOptions(noHost, COSTS).map((o) => o.kind), ["dropAll"]);
  assertEquals(choosePreemption(noHost, COSTS).kind, "dropAll");
  assertEquals(choosePreemption({ ...noHost, dropBlocks: 2 }, COSTS).kind, "dropOldest");
});

Deno.test("a buffer that hides the resume: the cheaper total wins over the quicker resume", () => {
  const slowCopies = { ...COSTS, copyMs: (_dir: "in" | "out", blocks: number) => 1 + 2.5 * blocks };
  // Swap: 21 out, 21 + 3 in. Drop all: 40 at resume. With no buffer the stall counts again:
  // swap 21 + 24 + 24 = 69 against 40 + 40 = 80. With 1 s buffered it does not: 45 against 40.
  assertEquals(scores(VICTIM, slowCopies), { dropAll: 80, swap: 69 });
  assertEquals(choosePreemption(VICTIM, slowCopies).kind, "swap");
  const buffered = { ...VICTIM, slackMs: 1000 };
  assertEquals(scores(buffered, slowCopies), { dropAll: 40, swap: 45 });
  assertEquals(choosePreemption(buffered, slowCopies).kind, "dropAll");
  // Half covered: the stall is what the buffer does not hide. Swap 45 + 4, drop all 40 + 20.
  assertEquals(scores({ ...VICTIM, slackMs: 20 }, slowCopies), { dropAll: 60, swap: 49 });
});

Deno.test("KV already on the host (write-through) is not copied out again", () => {
  const slowCopies = { ...COSTS, copyMs: (_dir: "in" | "out", blocks: number) => 1 + 2.5 * blocks };
  const buffered = { ...VICTIM, slackMs: 1000 };
  // 6 of its 8 blocks are there: 2 go out (6 ms), then 24 in. 30 against dropping all's 40.
  assertEquals(scores({ ...buffered, hostBlocks: 6 }, slowCopies).swap, 30);
  assertEquals(choosePreemption({ ...buffered, hostBlocks: 6 }, slowCopies).kind, "swap");
  // All there: nothing goes out at all.
  assertEquals(preemptOptions({ ...buffered, hostBlocks: 8 }, slowCopies)[1].nowMs, 0);
});

Deno.test("a request still prefilling: what it has not computed is prefilled whatever is chosen", () => {
  // 12 of its 30 prompt positions computed (3 blocks). Drop all: 30 rows = 10 + 10 + 10 + 8.
  // Swap: 3 blocks out (2.5), 3 in (2.5) and 18 rows (10 + 10 + 4). Drop 1: 4 + 18 = 22 rows.
  const v = { ...VICTIM, computed: 12, target: 30, dropBlocks: 1, slackMs: 1000 };
  assertEquals(scores(v, COSTS), { dropAll: 38, swap: 2.5 + 2.5 + 24, dropOldest: 10 + 10 + 8 });
  assertEquals(choosePreemption(v, COSTS).kind, "dropOldest");
});

Deno.test("equal scores: the option freeing most device memory (drop all, then swap)", () => {
  // Nothing computed yet: a swap moves nothing and prefills the one position, as drop-all does.
  const fresh = { ...VICTIM, computed: 0, target: 1 };
  assertEquals(scores(fresh, COSTS), { dropAll: 6, swap: 6 });
  assertEquals(choosePreemption(fresh, COSTS).kind, "dropAll");
});
