// Command-line flags of `deno task bench serve`, parsed with node:util and checked with zod.

import { parseArgs } from "node:util";
import { z } from "zod";
import { checkFlags, UsageError } from "../common/cli.ts";
import { parseDist } from "./random.ts";
import type { ConfigSpec } from "./run.ts";
import { assertSafeFlags } from "./server_process.ts";
import { MAX_REQUESTS_CAP } from "./workload.ts";

export const MAX_CONFIGS = 16;

/** Splits a flag string on whitespace, honouring '...' and "..." quoting. */
export function splitFlags(s: string): string[] {
  const out: string[] = [];
  const re = /"([^"]*)"|'([^']*)'|(\S+)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(s))) out.push(m[1] ?? m[2] ?? m[3]);
  return out;
}

/**
 * "big=--gpu-kv-mb 512;small=--gpu-kv-mb 24": configurations separated by ";", each a name and the
 * server flags that make it. A bare name runs the server's defaults, and a list of bare names may
 * also be separated by commas ("a,b,c": the same server several times, to see run-to-run noise).
 */
export function parseConfigs(s: string): ConfigSpec[] {
  const bareList = !s.includes(";") && !s.includes("=");
  const entries = s.split(bareList ? "," : ";");
  const configs = entries.map((e) => e.trim()).filter((e) => e !== "").map((e) => {
    const eq = e.indexOf("=");
    const name = (eq < 0 ? e : e.slice(0, eq)).trim();
    const flags = eq < 0 ? [] : splitFlags(e.slice(eq + 1));
    if (name === "" || /\s/.test(name)) {
      throw new Error(`--configs: bad configuration name "${name}"`);
    }
    assertSafeFlags(flags);
    if (flags.some((f) => /^--model(=|$)/.test(f))) {
      throw new Error(`--configs: pass the model with --model, not per config`);
    }
    return { name, flags };
  });
  if (configs.length === 0) throw new Error("--configs: no configuration given");
  if (configs.length > MAX_CONFIGS) {
    throw new Error(`--configs: at most ${MAX_CONFIGS} configurations`);
  }
  const names = configs.map((c) => c.name);
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup) throw new Error(`--configs: configuration "${dup}" given twice`);
  return configs;
}

const dist = (fallback: string) =>
  z.string().default(fallback).transform((s, ctx) => {
    try {
      return parseDist(s);
    } catch (e) {
      ctx.addIssue({ code: "custom", message: e instanceof Error ? e.message : String(e) });
      return z.NEVER;
    }
  });

export const ServeBenchFlags = z.object({
  configs: z.string().default("default").transform((s, ctx) => {
    try {
      return parseConfigs(s);
    } catch (e) {
      ctx.addIssue({ code: "custom", message: e instanceof Error ? e.message : String(e) });
      return z.NEVER;
    }
  }),
  model: z.string().min(1).default("demo"),
  workload: z.enum(["burst", "poisson", "trace"]).default("burst"),
  /** requests/s (the background rate under a burst) */
  rate: z.coerce.number().min(0).max(1000).default(0.25),
  "burst-size": z.coerce.number().int().min(0).max(MAX_REQUESTS_CAP).default(8),
  "burst-at-s": z.coerce.number().min(0).max(3600).default(1),
  "duration-s": z.coerce.number().positive().max(3600).default(20),
  lengths: z.enum(["short", "long", "mixed", "doc"]).default("short"),
  trace: z.string().optional(),
  seed: z.coerce.number().int().min(0).default(1),
  "reading-rate-dist": dist("normal:15:4"),
  "slo-ttft-ms": z.coerce.number().positive().default(1300),
  "slo-tbt-ms": z.coerce.number().positive().default(250),
  "max-requests": z.coerce.number().int().min(1).max(MAX_REQUESTS_CAP).default(24),
  "cancel-fraction": z.coerce.number().min(0).max(1).default(0),
  out: z.string().default("bench/reports"),
  "request-timeout-s": z.coerce.number().positive().max(3600).default(60),
  /** Whole-replay deadline per configuration; default: last arrival (or duration) + 60 s. */
  "deadline-s": z.coerce.number().positive().max(4 * 3600).optional(),
  "start-timeout-s": z.coerce.number().positive().max(3600).default(300),
  warmup: z.coerce.number().int().min(0).max(16).default(1),
  "scrape-ms": z.coerce.number().int().min(50).max(10_000).default(250),
  /** The configuration the report's goals are judged against; default: one named `fcfs`. */
  baseline: z.string().min(1).optional(),
}).refine((f) => f.workload !== "trace" || f.trace !== undefined, {
  message: "--workload trace needs --trace FILE",
}).refine((f) => f.baseline === undefined || f.configs.some((c) => c.name === f.baseline), {
  message: "--baseline must name one of the --configs",
  path: ["baseline"],
});

export type ServeBenchOptions = z.infer<typeof ServeBenchFlags>;

export { UsageError };

export function parseServeBenchFlags(args: string[]): ServeBenchOptions {
  const options: Record<string, { type: "string" }> = {};
  for (const key of Object.keys(ServeBenchFlags.shape)) options[key] = { type: "string" };
  let values;
  try {
    values = parseArgs({ args, options, strict: true, allowPositionals: false }).values;
  } catch (e) {
    throw new UsageError(e instanceof Error ? e.message : String(e));
  }
  return checkFlags(ServeBenchFlags, values);
}
