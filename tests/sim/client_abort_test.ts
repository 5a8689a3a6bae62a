// Clients that give up, in fake time (matrix_sim.ts), as a capacity sweep's do past capacity
// (issue 31): at 2, 4 and 8 req/s every request has a timeout, every fourth reader hangs up
// after a few tokens, and the run's deadline aborts whoever is left. The run must end (simulate() used to
// wait for ever on the step in flight when its last client left: closing the runtime waits for
// that step, which ends on the fake clock), each client that gave up is recorded so, and the
// cancelled requests free every block they held, on the device and in the host tier.

import { CELLS, cellWorkload } from "../../bench/matrix/cells.ts";
import type { WorkloadRequest } from "../../bench/serve/workload.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { BUDGET_BLOCKS, DEFAULT, FCFS_VLLM, simulate } from "./matrix_sim.ts";
import type { SimConfig } from "../../sim/replay.ts";

const SWAP: SimConfig = {
  name: "swap",
  options: { policy: "fcfs", preempt: "swap", prefixCache: true, writeThrough: false },
  hostBlocks: 2000,
};

const REQUEST_TIMEOUT_MS = 8000;
/** After the last arrival: short, so that many requests are still running at the deadline. */
const DRAIN_MS = 4000;

/** Tokens after which every fourth reader hangs up: few, so that some do before their timeout. */
const HANG_UP_AFTER = 4;

/** The capacity sweep's default cell at a steady `rate`, every fourth reader hanging up early. */
function sweepPoint(rate: number): WorkloadRequest[] {
  const template = CELLS.find((c) => c.id === "chat-steady-human-tight")!;
  const blocks = BUDGET_BLOCKS[template.budget];
  const cell = { ...template, arrival: { kind: "steady" as const, rate }, durationS: 15 };
  return cellWorkload(cell, Math.floor(blocks / 4) * 16).map((w) =>
    w.id % 4 === 3 && w.outputLen > HANG_UP_AFTER ? { ...w, cancelAfterTokens: HANG_UP_AFTER } : w
  );
}

for (const rate of [2, 4, 8]) {
  for (const config of [FCFS_VLLM, DEFAULT, SWAP]) {
    Deno.test(`sim ${config.name} at ${rate} req/s with clients giving up: the run ends, each client's record says how it ended, and no KV block stays held`, async () => {
      const workload = sweepPoint(rate);
      const deadline = Math.max(...workload.map((w) => w.arrivalS)) * 1000 + DRAIN_MS;
      const { records, stats } = await simulate(
        workload,
        BUDGET_BLOCKS.tight,
        config,
        undefined,
        { requestTimeoutMs: REQUEST_TIMEOUT_MS, deadlineMs: deadline },
      );
      assertEquals(records.length, workload.length);
      const outcomes = new Map<string, number>();
      for (const r of records) {
        outcomes.set(r.outcome, (outcomes.get(r.outcome) ?? 0) + 1);
        const w = workload.find((w) => w.id === r.id)!;
        const hangUpAt = w.cancelAfterTokens ?? Infinity;
        const giveUpAt = Math.min(r.sentAtMs + REQUEST_TIMEOUT_MS, deadline);
        const tokens = r.arrivalsMs.length;
        if (r.outcome === "ok") assert(tokens === w.outputLen && tokens < hangUpAt, `${r.id}`);
        else if (r.outcome === "cancelled") assertEquals(tokens, hangUpAt, `${r.id}`);
        else {
          assertEquals(r.outcome, "timeout", `${r.id}`);
          assert(tokens < Math.min(hangUpAt, w.outputLen), `${r.id}: ${tokens} tokens`);
          assertEquals(r.endAtMs, giveUpAt, `${r.id}`);
        }
      }
      const gaveUp = [outcomes.get("timeout") ?? 0, outcomes.get("cancelled") ?? 0];
      assert(gaveUp.every((n) => n > 0), `timeouts and hang-ups: ${gaveUp}`);
      assertEquals(
        { device: stats.kvBlocksUsed, host: stats.hostBlocksUsed },
        { device: 0, host: 0 },
      );
    });
  }
}
