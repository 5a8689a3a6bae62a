// Swaps without reuse beside write-through, in fake time (matrix_sim.ts), on the two cells where
// the fake engine refused their plans: a swap-out that copied everything again beside the same
// step's write-through wrote host blocks twice, and one of a request swapped in by the same step
// copied device blocks its copies in had not filled yet (another layer's KV, read back later).
// Every request now ends as it should, and no block stays held on either tier.

import { applyOverrides, CELLS, cellWorkload } from "../../bench/matrix/cells.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { BUDGET_BLOCKS, simulate } from "./matrix_sim.ts";
import type { SimConfig } from "../../sim/replay.ts";

const SWAP_NO_REUSE_WT: SimConfig = {
  name: "swap-noreuse-wt",
  options: { policy: "fcfs", preempt: "swap", writeThrough: true, swapReuse: false },
  hostBlocks: 2000,
};

for (const id of ["chat-burst24-unpaced-tight", "chat-burst32-slow-tight"]) {
  Deno.test(`sim ${id}: --preempt swap --swap-reuse off --write-through on runs every request to its end, freeing every block`, async () => {
    const cell = CELLS.find((c) => c.id === id)!;
    const blocks = BUDGET_BLOCKS[cell.budget];
    const workload = cellWorkload(applyOverrides(cell, {}), Math.floor(blocks / 4) * 16);
    const { records, stats } = await simulate(workload, blocks, SWAP_NO_REUSE_WT);
    assertEquals(records.filter((r) => r.outcome !== "ok").map((r) => r.id), []);
    assert(stats.swaps!.swapsOut > 0 && stats.swaps!.blocksWrittenThrough > 0);
    assertEquals([stats.kvBlocksUsed, stats.hostBlocksUsed], [0, 0]);
  });
}
