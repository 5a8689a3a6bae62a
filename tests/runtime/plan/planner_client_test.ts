// The planner in its Worker: asking never waits, the newest finished plan is the one read, a solve
// past its deadline is abandoned (Worker terminated) and the last plan stays, and close() leaves
// nothing running (Deno's sanitizers fail the test on a live Worker or timer).

import { PlannerClient } from "../../../runtime/plan/planner_client.ts";
import type { PlanInput } from "../../../runtime/plan/plan_types.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

/** Two requests that fit only if one of them offloads: a real solve, small and quick. */
function input(tokens = 160): PlanInput {
  return {
    requests: [
      { id: 1, tokens, blocksPerLayer: 10, bufferedTokens: 0 },
      { id: 2, tokens: 320, blocksPerLayer: 20, bufferedTokens: 0 },
    ],
    numLayers: 8,
    blockBytes: 1000,
    budgetBlocks: 200,
    prefetchRegionBlocks: Infinity,
    costs: {
      layer: { fixedMs: 10, perUnitMs: 1 },
      sample: { fixedMs: 1, perUnitMs: 0 },
      hostToDevice: { fixedMs: 0.01, perUnitMs: 1e-4 },
      overlap: 0,
    },
    window: 8,
    timeoutMs: 500,
  };
}

const slowWorker = new URL("./slow_planner_worker.ts", import.meta.url);

Deno.test("planner client: request returns at once; latest() is the newest plan", async () => {
  const client = new PlannerClient();
  try {
    const seq = client.request(input());
    // Returned before the solve ended: the plan is still to come, the worker still busy. (Not a
    // wall-clock bound: those flake on a loaded machine and belong in benchmarks.)
    assert(client.busy, "request must not wait for the solve");
    assertEquals(client.latest(), undefined);
    assertEquals(await client.settled(seq), "planned");
    const plan = client.latest()!;
    assert(plan.feasible);
    assertEquals(client.latestSeq, seq);
    // 240 blocks on 200: someone offloads, and the plan fits.
    assert([...plan.distances.values()].some((d) => d > 0));
    assert(plan.deviceBlocks <= 200);
  } finally {
    client.close();
  }
});

Deno.test("planner client: a request made while one solves replaces the one waiting", async () => {
  const client = new PlannerClient();
  try {
    const a = client.request(input()), b = client.request(input()), c = client.request(input());
    assertEquals(await client.settled(b), "superseded");
    assertEquals(await client.settled(a), "planned");
    assertEquals(await client.settled(c), "planned");
    assertEquals(client.latestSeq, c);
  } finally {
    client.close();
  }
});

Deno.test("planner client: a solve past its deadline is abandoned and the last plan stays", async () => {
  const client = new PlannerClient({ workerUrl: slowWorker, graceMs: 0 });
  try {
    // Quick first (a 0 ms wait), then one that holds its thread for 5 s against a 100 ms deadline.
    const first = client.request({ ...input(0), timeoutMs: 1000 });
    assertEquals(await client.settled(first), "planned");
    const kept = client.latest();
    const t0 = performance.now();
    const slow = client.request({ ...input(5000), timeoutMs: 100 });
    assertEquals(await client.settled(slow), "abandoned");
    const waited = performance.now() - t0;
    assert(waited < 1000, `abandoned after ${waited} ms, not at its 100 ms deadline`);
    assertEquals(client.abandoned, 1);
    assertEquals(client.latest(), kept);
    assertEquals(client.latestSeq, first);
    // A fresh Worker takes the next request.
    const after = client.request({ ...input(0), timeoutMs: 1000 });
    assertEquals(await client.settled(after), "planned");
    assertEquals(client.latestSeq, after);
  } finally {
    client.close();
  }
});

Deno.test("planner client: close() settles what is pending and refuses new requests", async () => {
  const client = new PlannerClient({ workerUrl: slowWorker });
  const seq = client.request({ ...input(2000), timeoutMs: 5000 });
  client.close();
  assertEquals(await client.settled(seq), "superseded");
  assert(!client.busy);
  let refused = false;
  try {
    client.request(input());
  } catch {
    refused = true;
  }
  assert(refused);
});
