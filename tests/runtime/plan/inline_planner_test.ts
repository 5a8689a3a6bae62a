// The inline planner (runtime/plan/inline_planner.ts): OrbitFlow's plans without a Worker or a wall
// clock. Its answer lands on a microtask, not inside request(); a solve has no deadline, so a plan
// is the same however little time the input allowed; requests made while one solves are answered
// as the Worker's client answers them (only the newest waiting one); close() settles what is left.

import type { CostModel } from "../../../engine/engine.ts";
import { InlinePlanner } from "../../../runtime/plan/inline_planner.ts";
import { orbitPlan } from "../../../runtime/plan/orbit_planner.ts";
import type { PlanInput } from "../../../runtime/plan/plan_types.ts";
import { costModelWithLayer } from "../../helpers/cost_models.ts";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";

const costs: CostModel = costModelWithLayer(2, 0.3, { roundTripMs: 1 });

/**
 * Requests of `tokens` context each (default one of 40) on `budgetBlocks` device blocks (default
 * room for it whole: every window up to 64 holds).
 */
function input(timeoutMs: number, tokens = [40], budgetBlocks = 1000): PlanInput {
  return {
    requests: tokens.map((t, i) => ({
      id: i + 1,
      tokens: t,
      blocksPerLayer: Math.ceil(t / 4),
      bufferedTokens: 0,
    })),
    numLayers: 4,
    blockBytes: 4096,
    blockTokens: 4,
    budgetBlocks,
    prefetchRegionBlocks: 16,
    costs,
    window: 4,
    maxWindow: 64,
    timeoutMs,
  };
}

Deno.test("inline planner: the answer lands after request() returns, on a microtask", async () => {
  const planner = new InlinePlanner();
  const seq = planner.request(input(100));
  assertEquals([planner.latest(), planner.latestSeq, planner.busy], [undefined, 0, true]);
  assertEquals(await planner.settled(seq), "planned");
  assertEquals([planner.latestSeq, planner.busy], [seq, false]);
  assertEquals(planner.latest()!.distances, new Map([[1, 0]]));
  planner.close();
});

Deno.test("inline planner: no deadline, so a zero time limit gives the plan a generous one gives", async () => {
  // With no time left, the planner stops at the shortest window (plan_batch.ts); inline, it
  // chooses as if it had all the time it needs.
  assertEquals(orbitPlan(input(0)).window, 4);
  const unhurried = orbitPlan(input(1e9));
  assertEquals(unhurried.window, 64);
  const planner = new InlinePlanner();
  await planner.settled(planner.request(input(0)));
  const plan = planner.latest()!;
  assertEquals([plan.window, plan.distances], [unhurried.window, unhurried.distances]);
  planner.close();
});

Deno.test("inline planner: of the requests made while one solves, only the newest is answered too", async () => {
  const planner = new InlinePlanner();
  const [first, replaced, newest] = [40, 44, 48].map((t) => planner.request(input(100, [t])));
  const outcomes = await Promise.all([first, replaced, newest].map((s) => planner.settled(s)));
  assertEquals(outcomes, ["planned", "superseded", "planned"]);
  assertEquals(planner.latestSeq, newest);
  planner.close();
});

Deno.test("inline planner: the same requests give the same plans", async () => {
  // Three requests needing 240 blocks whole on 150: some must offload, so the ILP is solved.
  const batch = input(100, [40, 80, 120], 150);
  const plans = [];
  for (let run = 0; run < 2; run++) {
    const planner = new InlinePlanner();
    await planner.settled(planner.request(batch));
    const { solveMs: _measured, ...plan } = planner.latest()!;
    plans.push(plan);
    planner.close();
  }
  assert([...plans[0].distances.values()].some((d) => d > 0), "something is offloaded");
  assertEquals(plans[0], plans[1]);
});

Deno.test("inline planner: close() settles what is pending and refuses new requests", async () => {
  const planner = new InlinePlanner();
  const seq = planner.request(input(100));
  planner.close();
  assertEquals(await planner.settled(seq), "superseded");
  assert(planner.latest() === undefined);
  assertThrows(() => planner.request(input(100)));
});
