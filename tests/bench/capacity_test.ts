// The capacity sweep's pure parts: the search over a fake measurement (bounds first, bisection in
// log space, misses and noise), the ratio to the baseline against issue 19's 1.3x goal, the
// report, and the flags.

import {
  capacityRatio,
  roundRate,
  searchCapacity,
  type SearchOptions,
} from "../../bench/matrix/capacity_search.ts";
import { capacityReport } from "../../bench/matrix/capacity_report.ts";
import { BASELINE } from "../../bench/matrix/flags.ts";
import { benchCapacity } from "../../bench/capacity.ts";
import { UsageError } from "../../bench/common/cli.ts";
import { assert, assertEquals, assertRejects } from "../helpers/testing.ts";
import { testSeed } from "../helpers/random.ts";

const OPTS: SearchOptions = { lo: 0.1, hi: 3.2, steps: 5, target: 0.9 };

/** Goodput 1 up to `cap`, 0.5 above it; records the rates asked. */
function fake(cap: number, asked: number[] = []) {
  return (rate: number) => {
    asked.push(rate);
    return Promise.resolve(rate <= cap ? 1 : 0.5);
  };
}

Deno.test("capacity: bounds first, then bisection in log space to the highest passing rate", async () => {
  const seed = testSeed();
  const cap = 0.1 + (seed % 3000) / 1000; // in (0.1, 3.1]
  const asked: number[] = [];
  const c = await searchCapacity(fake(cap, asked), OPTS);
  assertEquals(asked.slice(0, 2), [0.1, 3.2], `seed ${seed}`);
  assertEquals(c.status, "bracketed");
  assertEquals(asked.length, 2 + OPTS.steps);
  assert(c.rate! <= cap, `seed ${seed}: ${c.rate} <= ${cap}`);
  // Within one bracket: a factor of 32^(1/32) of the true capacity.
  assert(cap / c.rate! <= Math.pow(32, 1 / 32) * 1.001, `seed ${seed}: ${c.rate} vs ${cap}`);
  assertEquals(c.points.map((p) => p.rate), asked);
  for (let i = 2; i < asked.length; i++) {
    const below = c.points.slice(0, i).filter((p) => p.passed).map((p) => p.rate);
    const above = c.points.slice(0, i).filter((p) => !p.passed).map((p) => p.rate);
    const lo = Math.max(...below);
    const hi = Math.min(...above);
    assertEquals(asked[i], roundRate(Math.sqrt(lo * hi)), "the geometric mean of the bracket");
  }
});

Deno.test("capacity: below the lower bound, at least the upper, misses and noise", async () => {
  const below = await searchCapacity(fake(0.05), OPTS);
  assertEquals([below.rate, below.status, below.points.length], [null, "below", 1]);
  const above = await searchCapacity(fake(10), OPTS);
  assertEquals([above.rate, above.status, above.points.length], [3.2, "at-least", 2]);
  // A run that could not be measured counts as a miss.
  const broken = await searchCapacity(() => Promise.resolve(null), OPTS);
  assertEquals([broken.status, broken.points[0].goodput, broken.points[0].passed], [
    "below",
    null,
    false,
  ]);
  // Exactly the target passes.
  const edge = await searchCapacity(() => Promise.resolve(0.9), { ...OPTS, steps: 0 });
  assertEquals(edge.status, "at-least");
  // Noise: a miss below a pass sends the search down; it never measures above a failure.
  const asked: number[] = [];
  const noisy = await searchCapacity((r) => {
    asked.push(r);
    return Promise.resolve(r < 0.2 || (r > 0.5 && r < 1) ? 1 : 0);
  }, { ...OPTS, steps: 3 });
  assertEquals(noisy.rate, asked[asked.length - 1] < 0.2 ? asked[asked.length - 1] : noisy.rate);
  for (const [i, r] of asked.entries()) {
    const failedBefore = noisy.points.slice(0, i).filter((p) => !p.passed).map((p) => p.rate);
    assert(failedBefore.every((f) => r < f), `rate ${r} measured above a failure`);
  }
  await assertRejects(() => searchCapacity(fake(1), { ...OPTS, lo: 2, hi: 1 }));
});

Deno.test("capacity: the ratio to the baseline and issue 19's 1.3x goal", async () => {
  const at = (cap: number) => searchCapacity(fake(cap), OPTS);
  const base = await at(0.5);
  const r = capacityRatio(await at(1), base);
  assert(r.ratio! > 1.3 && r.met === true && !r.lowerBound, JSON.stringify(r));
  assertEquals(capacityRatio(await at(0.55), base).met, false);
  assertEquals(capacityRatio(base, base).ratio, 1);
  const capped = capacityRatio(await at(10), base);
  assertEquals([capped.lowerBound, capped.met], [true, true]);
  assertEquals(capacityRatio(await at(10), await at(2.9)).met, null, "a lower bound under 1.3x");
  assertEquals(capacityRatio(await at(1), await at(10)).met, null, "baseline at the upper bound");
  assertEquals(capacityRatio(await at(1), await at(0.01)).met, null, "baseline below the lower");
  assertEquals(capacityRatio(await at(0.01), base).met, false, "candidate below the lower");
  const md = capacityReport({
    title: "C",
    context: [],
    baseline: BASELINE,
    target: 0.9,
    configs: [
      { name: BASELINE, flags: [], capacity: base, details: [] },
      { name: "default", flags: [], capacity: await at(1), details: [] },
    ],
    reproduce: "x",
  });
  assert(md.includes(`| \`${BASELINE}\` (baseline) | ${base.rate} req/s | | |`), md);
  assert(md.includes("| **met** |"), md);
});

Deno.test("capacity flags: bad bounds, an unknown cell, a zero target refused before any server", async () => {
  for (
    const args of [["--rate-lo", "2", "--rate-hi", "1"], ["--cell", "nope"], ["--target", "0"]]
  ) {
    await assertRejects(() => benchCapacity(args), UsageError, args.join(" "));
  }
});
