// Flags shared by `bench matrix` and `bench capacity`: the configurations (by default fcfs as
// vLLM V1 runs it, the baseline, and the server's defaults), the model, the two KV budgets, the
// bounds of every run. Each command adds its own.

import { z } from "zod";
import { parseConfigs } from "../serve/flags.ts";
import type { ConfigSpec } from "../serve/run.ts";
import { DEFAULT_BUDGET_MB } from "./cells.ts";

/**
 * fcfs as vLLM V1 runs it: first come first served with KV blocks allocated on demand (what
 * `--sched fcfs` does), preemption by recompute (no host tier to swap to), prefix caching on, and
 * request priorities ignored (vLLM's default `fcfs` scheduling policy).
 */
export const VLLM_V1_FLAGS =
  "--sched fcfs --priority off --prefix-cache on --preempt recompute --host-kv-mb 0";

export const BASELINE = "fcfs-vllm";

export const DEFAULT_CONFIGS = `${BASELINE}=${VLLM_V1_FLAGS};default`;

const configs = z.string().default(DEFAULT_CONFIGS).transform((s, ctx) => {
  try {
    const list = parseConfigs(s);
    const owned = list.find((c) => c.flags.some((f) => /^--gpu-kv-mb(=|$)/.test(f)));
    if (owned) throw new Error(`"${owned.name}" sets --gpu-kv-mb: the cell's budget sets it`);
    return list;
  } catch (e) {
    ctx.addIssue({ code: "custom", message: e instanceof Error ? e.message : String(e) });
    return z.NEVER;
  }
});

/** The flags both commands take; `.extend()` adds a command's own (and its bounds, with
 * `bounds()`). */
export const CommonFlags = z.object({
  configs,
  /** The configuration the others are divided by; default fcfs-vllm. */
  baseline: z.string().min(1).default(BASELINE),
  model: z.string().min(1).default("demo"),
  "tight-kv-mb": z.coerce.number().positive().default(DEFAULT_BUDGET_MB.tight),
  "ample-kv-mb": z.coerce.number().positive().default(DEFAULT_BUDGET_MB.ample),
  "seed-offset": z.coerce.number().int().min(0).default(0),
  /** The model's context; absent, each configuration's server is asked (once per budget). */
  context: z.coerce.number().int().min(2).optional(),
  out: z.string().default("bench/reports"),
  "start-timeout-s": z.coerce.number().positive().max(3600).default(300),
  warmup: z.coerce.number().int().min(0).max(16).default(1),
  "scrape-ms": z.coerce.number().int().min(50).max(10_000).default(250),
});

/** Per-request timeout, and how long a replay may run past its last arrival (its deadline). */
export function bounds(timeoutS: number, drainS: number) {
  return {
    "request-timeout-s": z.coerce.number().positive().max(3600).default(timeoutS),
    "drain-s": z.coerce.number().positive().max(3600).default(drainS),
  };
}

/** The baseline must be one of the configurations, and there must be something to compare. */
export function checkBaseline(f: { configs: ConfigSpec[]; baseline: string }): string | null {
  if (!f.configs.some((c) => c.name === f.baseline)) {
    return `--baseline: "${f.baseline}" is not one of the --configs`;
  }
  if (f.configs.length < 2) return "--configs: give the baseline and at least one other";
  return null;
}

/** The flags of `--configs` as one string, for the report's reproduce line. */
export function configsArg(configs: ConfigSpec[]): string {
  return configs.map((c) => (c.flags.length ? `${c.name}=${c.flags.join(" ")}` : c.name)).join(
    ";",
  );
}

export function quote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** A command line's arguments as a shell reads them back: quoted only where needed. */
export function shellArgs(args: string[]): string {
  return args.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : quote(a))).join(" ");
}
