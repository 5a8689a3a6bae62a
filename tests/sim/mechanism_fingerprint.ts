// Fingerprints of the runtime's behaviour under every memory mechanism, for refactors that must
// change nothing: each configuration replays four tight cells of the workload matrix in fake time
// (matrix_sim.ts) and prints a hash of its clients' records (every token's arrival) and of the
// runtime's counters. Two runs of one commit print the same lines (OrbitFlow's planner solves
// inline there, with no wall clock: runtime/plan/inline_planner.ts); compare two commits with
// `diff`.
//
//   deno run -A --config tests/deno.json tests/sim/mechanism_fingerprint.ts [config names...]

import { applyOverrides, CELLS, cellWorkload } from "../../bench/matrix/cells.ts";
import { BUDGET_BLOCKS, DEFAULT, FCFS_VLLM, simulate } from "./matrix_sim.ts";
import type { SimConfig } from "../../sim/replay.ts";

const H = 65_536;
const configs: SimConfig[] = [
  FCFS_VLLM,
  DEFAULT,
  {
    name: "swap",
    options: { policy: "fcfs", preempt: "swap", prefixCache: true, writeThrough: false },
    hostBlocks: 2000,
  },
  {
    name: "swap-noreuse-wt",
    options: { policy: "fcfs", preempt: "swap", writeThrough: true, swapReuse: false },
    hostBlocks: 2000,
  },
  {
    name: "partial",
    options: { policy: "fcfs", preempt: "partial", prefixCache: true },
    hostBlocks: 0,
  },
  {
    name: "tokencache",
    options: { policy: "fcfs", tokenCache: true, preempt: "partial" },
    hostBlocks: 0,
  },
  {
    name: "tokencache-host",
    options: {
      policy: "tokenflow",
      tokenCache: true,
      recompute: "auto",
      prefixCache: true,
      writeThrough: true,
    },
    hostBlocks: H,
  },
  {
    name: "uniform2",
    options: {
      policy: "fcfs",
      offload: "uniform",
      offloadDistance: 2,
      prefixCache: true,
      writeThrough: true,
    },
    hostBlocks: H,
  },
  {
    name: "uniform1-swap",
    options: { policy: "fcfs", offloadDistance: 1, preempt: "swap", prefetchBlocks: 40 },
    hostBlocks: H,
  },
  {
    name: "orbit",
    options: { policy: "fcfs", offload: "orbit", prefixCache: true, writeThrough: true },
    hostBlocks: H,
  },
  {
    name: "slo-layerwise",
    options: { policy: "slo", layerwisePrefill: true, prefixCache: true, writeThrough: true },
    hostBlocks: H,
  },
  {
    name: "tokenflow-layerwise",
    options: { policy: "tokenflow", layerwisePrefill: true, recompute: "auto", writeThrough: true },
    hostBlocks: H,
  },
  { name: "reserve", options: { policy: "reserve", prefixCache: true }, hostBlocks: 0 },
  {
    name: "slo",
    options: { policy: "slo", prefixCache: true, recompute: "auto", writeThrough: true },
    hostBlocks: H,
  },
  {
    name: "tokenflow-keepup-hold",
    options: {
      policy: "tokenflow",
      tokenflowKeepUp: true,
      tokenflowOverload: "hold",
      tokenflowHoldBack: "always",
      prefixCache: true,
    },
    hostBlocks: 0,
  },
];
const want = [
  "chat-burst16-human-tight",
  "chat-burst32-slow-tight",
  "doc-burst8-slow-tight",
  "chat-burst24-unpaced-tight",
];
async function sha(s: string) {
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(s));
  return [...new Uint8Array(d)].slice(0, 8).map((b) => b.toString(16).padStart(2, "0")).join("");
}
const only = Deno.args;
for (const c of CELLS.filter((c) => want.includes(c.id))) {
  const blocks = BUDGET_BLOCKS[c.budget];
  const maxContext = Math.min(2048, Math.floor(blocks / 4) * 16);
  const workload = cellWorkload(applyOverrides(c, {}), maxContext);
  for (const config of configs) {
    if (only.length && !only.includes(config.name)) continue;
    let line: string;
    try {
      const { records, stats } = await simulate(workload, blocks, config);
      const s = { ...stats } as Record<string, unknown>;
      if (s.planner) {
        // Solve times are measured, not decided (0 in fake time, which fakes `performance`).
        s.planner = { ...(s.planner as object), lastSolveMs: undefined, solveMsTotal: undefined };
      }
      line = `${await sha(JSON.stringify(records))} ${await sha(
        JSON.stringify(s),
      )} pre=${stats.preemptions} steps=${stats.steps}`;
    } catch (e) {
      line = `ERROR ${(e as Error).message.slice(0, 100)}`;
    }
    console.log(`${c.id} ${config.name} ${line}`);
  }
}
