// The configurations the workload matrix compares in simulation: fcfs as vLLM V1 runs it (the
// baseline, bench/matrix/flags.ts's VLLM_V1_FLAGS), Sluice's default (cli/flags.ts's defaults:
// --sched auto), what auto runs on a software adapter (tokenflow's settings), and candidates, each
// tokenflow's settings with one of the rules the code already has switched.
// Both matrices use them: at the demo model's costs (tests/sim/matrix_sim.ts, this machine) and on
// the GPU profiles (sim/papers/matrix.ts).

import type { SimConfig } from "./replay.ts";

/** `--sched fcfs --priority off --prefix-cache on --preempt recompute --host-kv-mb 0`. */
export function fcfsVllm(): SimConfig {
  return {
    name: "fcfs-vllm",
    options: {
      policy: "fcfs",
      priority: false,
      prefixCache: true,
      preempt: "recompute",
      writeThrough: false,
    },
    hostBlocks: 0,
  };
}

/** What the server's defaults run where a step's rows cost what they cost (this machine): tokenflow,
 * prefix cache, swap or recompute by cost, write-through, swap reuse, with a host tier of
 * `hostBlocks`. */
export function tokenflowDefault(hostBlocks: number): SimConfig {
  return {
    name: "tokenflow",
    options: {
      policy: "tokenflow",
      prefixCache: true,
      recompute: "auto",
      writeThrough: true,
      swapReuse: true,
    },
    hostBlocks,
  };
}

/** The server's defaults: `--sched auto`, which runs tokenflowDefault's settings or vLLM V1's by
 * the engine's cost model (runtime/policy/economics.ts). */
export function sluiceDefault(hostBlocks: number): SimConfig {
  const t = tokenflowDefault(hostBlocks);
  return { ...t, name: "default", options: { ...t.options, policy: "auto" } };
}

/** Candidate defaults: tokenflow's settings with one rule changed, as its flag would change it. */
export const VARIANTS: Record<string, { flags: string; patch: Partial<SimConfig["options"]> }> = {
  /** TokenFlow's Eq. 6 overload fallback: hold new requests while readers outrun the GPU. */
  hold: { flags: "--tokenflow-overload hold", patch: { tokenflowOverload: "hold" } },
  /** Late newcomers queue behind paused requests. */
  behind: { flags: "--tokenflow-late behind", patch: { tokenflowLate: "behind" } },
  /** Admit only up to the batch that keeps up with the fastest reader. */
  keepup: { flags: "--tokenflow-keep-up on", patch: { tokenflowKeepUp: true } },
  /** Hold back a prefill whenever a running request's buffer is short, not only when idle. */
  holdback: {
    flags: "--tokenflow-hold-back always",
    patch: { tokenflowHoldBack: "always" },
  },
  /** Preempted KV always recomputed, never swapped (the host tier kept for write-through). */
  recompute: {
    flags: "--recompute off --preempt recompute",
    patch: { recompute: "off", preempt: "recompute" },
  },
  /** Preempted KV always swapped to the host tier. */
  swap: { flags: "--recompute off --preempt swap", patch: { recompute: "off", preempt: "swap" } },
  /** No write-through: KV is copied out only when a request is preempted. */
  nowt: { flags: "--write-through off", patch: { writeThrough: false } },
};

/** `base` with `variant`'s rule changed, named `<base>+<variant>`. */
export function variantOf(base: SimConfig, variant: string): SimConfig {
  const v = VARIANTS[variant];
  if (!v) {
    throw new Error(`unknown variant "${variant}" (${Object.keys(VARIANTS).join(", ")})`);
  }
  return { ...base, name: `${base.name}+${variant}`, options: { ...base.options, ...v.patch } };
}
