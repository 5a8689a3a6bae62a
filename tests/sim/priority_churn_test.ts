// FastSwitch's priority churn (sim/priority_churn.ts) and multi-turn conversations
// (sim/conversations.ts) through the replay: the patterns' rules, then a small run on the A10
// profile with a pool small enough that every update swaps someone out.

import { assert, assertEquals } from "../helpers/testing.ts";
import { priorityChurn } from "../../sim/priority_churn.ts";
import { conversationWorkload } from "../../sim/conversations.ts";
import { GpuEngine } from "../../sim/gpu_engine.ts";
import { PROFILES } from "../../sim/gpu_profiles.ts";
import { replay, type SimConfig } from "../../sim/replay.ts";

Deno.test("churn: Markov moves a served request one level better and an unserved one worse", () => {
  const churn = priorityChurn({
    pattern: "markov",
    seed: 1,
    frequency: 0.04,
    levels: 4,
    moveProbability: 1,
  });
  assertEquals(churn.everySteps, 25);
  const next = churn.update([
    { id: 1, priority: 2, servedSinceUpdate: 5 },
    { id: 2, priority: 2, servedSinceUpdate: 0 },
    { id: 3, priority: 0, servedSinceUpdate: 3 }, // already the best
    { id: 4, priority: 3, servedSinceUpdate: 0 }, // already the worst
  ]);
  assertEquals([...next.entries()].sort(), [[1, 1], [2, 3], [3, 0], [4, 3]]);
});

Deno.test("churn: Random draws every level, the same for the same seed whatever the list's order", () => {
  const live = Array.from({ length: 40 }, (_, id) => ({ id, priority: 0, servedSinceUpdate: 0 }));
  const a = priorityChurn({ pattern: "random", seed: 7, frequency: 0.02 });
  const b = priorityChurn({ pattern: "random", seed: 7, frequency: 0.02 });
  const first = a.update(live);
  assertEquals(first, b.update([...live].reverse()));
  assertEquals(new Set(first.values()), new Set([0, 1, 2, 3]));
  assertEquals(a.initial(5), b.initial(5));
});

/** A small conversation run on the A10 with 4K tokens of KV, swap preemption, Markov churn. */
async function smallRun(config: SimConfig, churned: boolean) {
  const profile = { ...PROFILES.fastswitch, kvTokens: 4096 };
  const workload = conversationWorkload({
    seed: 3,
    conversations: 6,
    turnRate: 2,
    multiTurnShare: 1,
    meanTurns: 3,
    input: { median: 200, sigma: 0.5 },
    output: { median: 120, sigma: 0.5 },
    thinkS: 1,
    maxContext: 2048,
    sloTtftMs: 1000,
    sloTbtMs: 100,
  });
  const run = await replay(
    workload,
    () => new GpuEngine(profile, { maxContext: 2048, hostBlocks: config.hostBlocks }),
    config,
    churned ? { churn: priorityChurn({ pattern: "markov", seed: 3, frequency: 0.1 }) } : {},
  );
  return { workload, ...run };
}

Deno.test("replay: follow-up turns wait for the turn before; churn swaps requests out, and every block is freed", async () => {
  const config: SimConfig = {
    name: "swap",
    options: { policy: "fcfs", preempt: "swap", swapReuse: true, writeThrough: false },
    hostBlocks: 32 * 1024,
  };
  const { workload, records, stats } = await smallRun(config, true);
  assert(workload.some((w) => w.after), "the workload has follow-up turns");
  assertEquals(records.filter((r) => r.outcome !== "ok").map((r) => r.id), []);
  for (const w of workload) {
    if (!w.after) continue;
    const before = records.find((r) => r.id === w.after!.id)!;
    assert(records.find((r) => r.id === w.id)!.sentAtMs >= before.endAtMs);
  }
  assert(stats.swaps!.swapsOut > 0, "priority updates swapped requests out");
  assertEquals([stats.kvBlocksUsed, stats.hostBlocksUsed], [0, 0]);
  // Deterministic: the same run gives the same timelines.
  const again = await smallRun(config, true);
  assertEquals(again.records, records);
  assertEquals(again.stats.swaps, stats.swaps);
});
