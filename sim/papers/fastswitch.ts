// FastSwitch's LLaMA-8B / A10 latency comparison (its Fig. 8a–b) and its swap-out reuse figure
// (Table 1), in simulation beside the paper's own figures.
//
// The setup as the paper states it: LLaMA-8B on an A10, 60 GB of CPU swap space, PCIe 4.0, vLLM's
// 16-token blocks; multi-turn ShareGPT conversations (78% multi-turn, 5.5 turns on average) at 1
// request/s, Poisson; priorities that change every 25 iterations (f = 0.04) by a Random or a Markov
// pattern; TTFT per turn at P95/P99/P99.9 and TBT at P99.9. What it does not state, and we chose:
// the patterns' levels and transitions (sim/priority_churn.ts), the lengths (log-normal: messages
// of median 80 tokens, replies of median 200, conversations within Llama-3's 8K context), the think
// time between turns (exponential, mean 10 s), and that 1 request/s counts turns (conversations
// start at 1/5.5 per second). Systems as Sluice runs them, all on the same priorities:
//   - vllm-swap: vLLM v0 with swap forced: `fcfs` with priorities, `--preempt swap`, no prefix
//     cache, host copies not reused, one copy call per block (no block groups), whole prompts in
//     one step;
//   - fcfs-vllm: Sluice's vLLM-V1-like preset (prefix cache, recompute, chunks of 2,048 rows),
//     which ignores priorities: the reference without context switches;
//   - fastswitch: `fcfs` with priorities, `--preempt swap`, block groups (one copy per run of
//     blocks), host copies reused (`--swap-reuse on`) and earlier turns' KV kept through the prefix
//     cache's host tier (the next turn's prefill starts from it); its swaps run beside the step's
//     kernels (FastSwitch's Multithreading Swap Manager, §3.3), which the simulated engine does
//     (gpu_step_cost.ts, CopyIssue.async) and WebGPU's one queue cannot;
//   - fastswitch, sync swaps: the same with swaps before the step's kernels, as Sluice's engine
//     runs them: the asynchronous swap's share, measured;
//   - fastswitch w/o reuse: fastswitch without either reuse (Table 1's "traditional swap out").

import { percentile, requestMetrics } from "../../bench/serve/metrics.ts";
import { summarize } from "../../bench/serve/metrics.ts";
import type { RuntimeStats } from "../../runtime/service.ts";
import { conversationWorkload } from "../conversations.ts";
import { fmt } from "../experiment.ts";
import { GpuEngine } from "../gpu_engine.ts";
import { PROFILES, type SimProfile } from "../gpu_profiles.ts";
import { blocksFor } from "../gpu_step_cost.ts";
import { type ChurnPattern, priorityChurn } from "../priority_churn.ts";
import { fcfsVllm } from "../matrix_configs.ts";
import { replay, type SimRequest } from "../replay.ts";
import type { SimSystem } from "../experiment.ts";

const PROFILE = PROFILES.fastswitch;
const HOST_BLOCKS = blocksFor(PROFILE, PROFILE.hostKvTokens);
/** LLaMA-8B's update frequency (§4.2: every 25 iterations, to stress context switching). */
const FREQUENCY = 0.04;

const SWAP: SimSystem["config"]["options"] = {
  policy: "fcfs",
  priority: true,
  prefixCache: false,
  preempt: "swap",
  writeThrough: false,
  swapReuse: false,
};

export const VLLM_SWAP: SimSystem = {
  config: { name: "vllm-swap", options: SWAP, hostBlocks: HOST_BLOCKS },
  limits: { maxRows: 8192, copyPerBlock: true },
  about: "vLLM v0, swap forced: a copy per block, no reuse, no prefix cache",
};
export const FCFS_VLLM: SimSystem = {
  config: fcfsVllm(),
  about: "vLLM V1-like: prefix cache, recompute, chunks of 2,048 rows; priorities ignored",
};
export const FASTSWITCH: SimSystem = {
  config: {
    name: "fastswitch",
    options: { ...SWAP, prefixCache: true, swapReuse: true },
    hostBlocks: HOST_BLOCKS,
  },
  limits: { maxRows: 8192, asyncCopies: true },
  about: "block groups, host copies reused, earlier turns' KV kept on the host; swaps asynchronous",
};
export const FASTSWITCH_SYNC: SimSystem = {
  config: { ...FASTSWITCH.config, name: "fastswitch, sync swaps" },
  limits: { maxRows: 8192 },
  about: "fastswitch with its swaps before the step's kernels (Sluice's engine)",
};
export const FASTSWITCH_NO_REUSE: SimSystem = {
  config: { name: "fastswitch w/o reuse", options: SWAP, hostBlocks: HOST_BLOCKS },
  limits: { maxRows: 8192, asyncCopies: true },
  about: "block groups and asynchronous swaps only",
};
const SYSTEMS = [VLLM_SWAP, FCFS_VLLM, FASTSWITCH, FASTSWITCH_SYNC, FASTSWITCH_NO_REUSE];

export function fastswitchWorkload(scale = 1): SimRequest[] {
  return conversationWorkload({
    seed: 31,
    conversations: Math.max(4, Math.round(1000 * scale)),
    turnRate: 1,
    multiTurnShare: 0.78,
    meanTurns: 5.5,
    input: { median: 80, sigma: 1 },
    output: { median: 200, sigma: 0.8 },
    thinkS: 10,
    maxContext: 8192,
    sloTtftMs: 1000,
    sloTbtMs: 100,
  });
}

/** The paper's Fig. 8a–b speedups over vLLM (P95, P99, P99.9 TTFT; P99.9 TBT). */
const PAPER: Record<ChurnPattern, number[]> = {
  markov: [5.8, 4.1, 3.7, 2.0],
  random: [4.3, 3.7, 2.5, 2.7],
};

export interface Run {
  pattern: ChurnPattern;
  system: string;
  ttft: (number | null)[];
  tbt999: number | null;
  throughput: number | null;
  stats: RuntimeStats;
  turns: number;
}

/** One system on one pattern (exported for sweeps of what the paper leaves open). */
export async function fastswitchRun(
  profile: SimProfile,
  workload: readonly SimRequest[],
  pattern: ChurnPattern,
  system: SimSystem,
): Promise<Run> {
  const { records, stats } = await replay(
    workload,
    () =>
      new GpuEngine(profile, {
        maxContext: 8192,
        ...system.limits,
        hostBlocks: system.config.hostBlocks,
      }),
    system.config,
    {
      maxQueue: 100_000,
      maxTokensLimit: 8192,
      requestTimeoutMs: 3_600_000,
      churn: priorityChurn({ pattern, seed: 31, frequency: FREQUENCY }),
    },
  );
  const per = records.map(requestMetrics);
  const ttfts = per.flatMap((m) => m.ttftMs === null ? [] : [m.ttftMs]);
  const gaps = per.flatMap((m) => m.gapsMs);
  return {
    pattern,
    system: system.config.name,
    ttft: [95, 99, 99.9].map((p) => percentile(ttfts, p)),
    tbt999: percentile(gaps, 99.9),
    throughput: summarize(records).rawTokensPerS,
    stats,
    turns: records.length,
  };
}

const speedup = (base: number | null, x: number | null) =>
  base === null || x === null || x === 0 ? "–" : `${(base / x).toFixed(2)}×`;

/**
 * Runs the experiment and returns its Markdown report. `scale` shrinks the conversation count;
 * `kvShare` runs it with that share of the derived device KV budget (the paper does not state its
 * own).
 */
export async function fastswitchReport(
  scale = 1,
  log: (line: string) => void = () => {},
  kvShare = 1,
): Promise<string> {
  const profile = { ...PROFILE, kvTokens: Math.round(PROFILE.kvTokens * kvShare) };
  const workload = fastswitchWorkload(scale);
  const runs: Run[] = [];
  for (const pattern of ["markov", "random"] as const) {
    for (const system of SYSTEMS) {
      const started = performance.now();
      runs.push(await fastswitchRun(profile, workload, pattern, system));
      log(
        `fastswitch ${pattern} ${system.config.name}: ${
          ((performance.now() - started) / 1000).toFixed(1)
        } s of wall clock`,
      );
    }
  }
  const of = (pattern: ChurnPattern, system: SimSystem) =>
    runs.find((r) => r.pattern === pattern && r.system === system.config.name)!;
  const conversations = new Set(workload.filter((w) => !w.after).map((w) => w.id)).size;
  const lines = [
    `Profile: ${PROFILE.about}; device KV ${profile.kvTokens} tokens (${kvShare} of that). ${conversations} conversations, ${workload.length} turns; ` +
    `priorities updated every ${Math.round(1 / FREQUENCY)} iterations.`,
    "",
    "| pattern | system | P95 TTFT s | P99 TTFT s | P99.9 TTFT s | P99.9 TBT ms | tok/s | " +
    "preemptions | swap-outs | swap-out blocks |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const r of runs) {
    const s = r.stats.swaps;
    lines.push(
      `| ${r.pattern} | ${r.system} | ${
        r.ttft.map((x) => fmt(x === null ? null : x / 1000, 2))
          .join(" | ")
      } | ${fmt(r.tbt999)} | ${fmt(r.throughput)} | ${r.stats.preemptions} | ${
        s?.swapsOut ?? 0
      } | ${s?.blocksOut ?? 0} |`,
    );
  }
  lines.push(
    "",
    "Speedups over vllm-swap (its figure ÷ the system's), beside the paper's (Fig. 8a–b):",
    "",
    "| pattern | system | P95 TTFT | P99 TTFT | P99.9 TTFT | P99.9 TBT | throughput |",
    "| --- | --- | --- | --- | --- | --- | --- |",
  );
  for (const pattern of ["markov", "random"] as const) {
    const base = of(pattern, VLLM_SWAP);
    for (const system of [FASTSWITCH, FASTSWITCH_SYNC, FASTSWITCH_NO_REUSE, FCFS_VLLM]) {
      const r = of(pattern, system);
      lines.push(
        `| ${pattern} | ${r.system} | ${
          r.ttft.map((x, i) => speedup(base.ttft[i], x)).join(" | ")
        } | ${speedup(base.tbt999, r.tbt999)} | ${
          base.throughput && r.throughput ? `${(r.throughput / base.throughput).toFixed(2)}×` : "–"
        } |`,
      );
    }
    lines.push(
      `| ${pattern} | paper: FastSwitch | ${
        PAPER[pattern].map((x) => `${x.toFixed(1)}×`).join(" | ")
      } | up to 1.33× |`,
    );
  }
  lines.push(
    "",
    "Swap-out blocks (one block: 16 positions of one layer), FastSwitch with and without reuse" +
      " (paper, Table 1: 122,030 → 58,187 blocks, −52.3%):",
    "",
    "| pattern | w/o reuse | with reuse | change |",
    "| --- | --- | --- | --- |",
  );
  for (const pattern of ["markov", "random"] as const) {
    const without = of(pattern, FASTSWITCH_NO_REUSE).stats.swaps?.blocksOut ?? 0;
    const withReuse = of(pattern, FASTSWITCH).stats.swaps?.blocksOut ?? 0;
    lines.push(
      `| ${pattern} | ${without} | ${withReuse} | ${
        without ? `${((withReuse / without - 1) * 100).toFixed(1)}%` : "–"
      } |`,
    );
  }
  return lines.join("\n");
}
