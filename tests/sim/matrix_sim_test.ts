// The default policy against fcfs as vLLM runs it, in fake time (matrix_sim.ts), on two cells of
// the workload matrix where the old default held first tokens back (issue 19: TTFT p99 3.16× and
// 3.3× fcfs's): TTFT is an SLO, so the default's TTFT p99 stays within 5% of fcfs's there, while
// the old guards, still behind their flags, do not.

import { CELLS } from "../../bench/matrix/cells.ts";
import { assert } from "../helpers/testing.ts";
import { DEFAULT, FCFS_VLLM, simulateCell } from "./matrix_sim.ts";
import type { SimConfig } from "../../sim/replay.ts";

const GUARDED: SimConfig = {
  name: "guarded",
  options: { ...DEFAULT.options, tokenflowKeepUp: true, tokenflowOverload: "hold" },
  hostBlocks: DEFAULT.hostBlocks,
};

for (const id of ["chat-steady-human-tight", "chat-burst8-fast-ample"]) {
  Deno.test(`sim ${id}: the default's TTFT p99 is within 1.05× fcfs-vllm's; with --tokenflow-keep-up on and --tokenflow-overload hold it is not`, async () => {
    const cell = CELLS.find((c) => c.id === id)!;
    const r = await simulateCell(cell, [FCFS_VLLM, DEFAULT, GUARDED]);
    const p99 = (name: string) => r.summaries.get(name)!.ttftMs.p99!;
    const base = p99(FCFS_VLLM.name);
    assert(p99(DEFAULT.name) <= 1.05 * base, `default ${p99(DEFAULT.name)} ms vs fcfs ${base} ms`);
    assert(p99(GUARDED.name) > 1.5 * base, `guarded ${p99(GUARDED.name)} ms vs fcfs ${base} ms`);
    for (const s of r.summaries.values()) assert(s.completed === s.requests);
  });
}
