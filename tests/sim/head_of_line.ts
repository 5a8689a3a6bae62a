// Head-of-line prefill in fake time (issue 31): a short stream arrives while a long prompt
// prefills, replayed through the real Runtime over matrix_sim.ts's simulated engine (the demo
// model's step costs, 128 rows a step). Prints, per configuration, the newcomer's time to first
// token on an idle server and beside the long prefill, and the long prompt's own, in fake ms.
//
//   deno run -A --config tests/deno.json tests/sim/head_of_line.ts [long] [short] [arrival s]

import type { WorkloadRequest } from "../../bench/serve/workload.ts";
import type { RequestRecord } from "../../bench/serve/record.ts";
import { BUDGET_BLOCKS, DEFAULT, FCFS_VLLM, simulate } from "./matrix_sim.ts";
import type { SimConfig } from "../../sim/replay.ts";

/** The real server's case: an 1,800-token prompt, then a 60-token stream one second later. */
export const CASE = { longPrompt: 1800, shortPrompt: 60, arrivalS: 1 };

function request(id: number, promptLen: number, arrivalS: number): WorkloadRequest {
  return {
    id,
    arrivalS,
    promptLen,
    outputLen: 16,
    readingRate: 1000, // unpaced: a token reaches the client as soon as it is sampled
    sloTtftMs: 10_000,
    sloTbtMs: 1000,
  };
}

const ttft = (r: RequestRecord) => r.arrivalsMs[0];

/** The newcomer's TTFT alone and beside the long prefill, and the long prompt's TTFT, in ms. */
export async function headOfLine(config: SimConfig, c = CASE) {
  const idle = await simulate([request(1, c.shortPrompt, 0)], BUDGET_BLOCKS.ample, config);
  const busy = await simulate(
    [request(0, c.longPrompt, 0), request(1, c.shortPrompt, c.arrivalS)],
    BUDGET_BLOCKS.ample,
    config,
  );
  return {
    idleMs: ttft(idle.records[0]),
    besideMs: ttft(busy.records[1]),
    longMs: ttft(busy.records[0]),
  };
}

if (import.meta.main) {
  const [long, short, at] = Deno.args.map(Number);
  const c = {
    longPrompt: long || CASE.longPrompt,
    shortPrompt: short || CASE.shortPrompt,
    arrivalS: at || CASE.arrivalS,
  };
  console.log(
    `${c.shortPrompt}-token stream arriving ${c.arrivalS} s into a ${c.longPrompt}-token prefill`,
  );
  console.log("config | newcomer TTFT idle ms | newcomer TTFT beside ms | long prompt TTFT ms");
  for (const config of [FCFS_VLLM, DEFAULT]) {
    const r = await headOfLine(config, c);
    console.log(`${config.name} | ${r.idleMs} | ${r.besideMs} | ${r.longMs}`);
  }
}
