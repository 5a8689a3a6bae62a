// Runs one workload against every configuration at one KV budget (one server each, started and
// stopped by the serving bench's runConfig), keeping each one's raw results and server log in the
// run's folder; and learns the context a budget leaves each configuration, so a workload can be
// generated to fit it before any server replays it.

import { type ConfigResult, type ConfigSpec, modelInfo, runConfig } from "../serve/run.ts";
import { slug } from "../serve/report.ts";
import { startServer } from "../serve/server_process.ts";
import type { WorkloadRequest } from "../serve/workload.ts";

export interface RunEnv {
  model: string;
  /** Program and leading arguments that start a server. */
  serverCommand: string[];
  cwd?: string;
  startTimeoutMs: number;
  requestTimeoutMs: number;
  scrapeIntervalMs: number;
  warmupRequests: number;
  log: (line: string) => void;
}

/** The run flags both commands share (bench/matrix/flags.ts), as a RunEnv. */
export interface RunFlags {
  model: string;
  "start-timeout-s": number;
  "request-timeout-s": number;
  "scrape-ms": number;
  warmup: number;
}

/** Where servers come from and how runs are bounded: this repo's `main.ts serve` unless hooked. */
export function runEnv(
  f: RunFlags,
  serverCommand: string[] | undefined,
  repoRoot: string,
  log: (line: string) => void,
): RunEnv {
  return {
    model: f.model,
    serverCommand: serverCommand ?? [Deno.execPath(), "run", "-A", "main.ts", "serve"],
    cwd: serverCommand ? undefined : repoRoot,
    startTimeoutMs: f["start-timeout-s"] * 1000,
    requestTimeoutMs: f["request-timeout-s"] * 1000,
    scrapeIntervalMs: f["scrape-ms"],
    warmupRequests: f.warmup,
    log,
  };
}

/** The configuration at a device KV budget. */
export function withBudget(config: ConfigSpec, budgetMb: number): ConfigSpec {
  return { name: config.name, flags: [...config.flags, "--gpu-kv-mb", String(budgetMb)] };
}

/**
 * The largest context every configuration allows at a budget (the pool's size bounds it, and a
 * prefetch region takes from it), asked of a server started for the purpose, once per flag set.
 * undefined when no server reports one (prompts are then bounded only when sent).
 */
export class ContextProbe {
  #known = new Map<string, number | undefined>();

  constructor(private env: RunEnv) {}

  async contextFor(configs: ConfigSpec[]): Promise<number | undefined> {
    let least: number | undefined;
    for (const c of configs) {
      const ctx = await this.#one(c);
      if (ctx !== undefined) least = Math.min(least ?? Infinity, ctx);
    }
    return least;
  }

  async #one(config: ConfigSpec): Promise<number | undefined> {
    const key = config.flags.join("\u0000");
    if (this.#known.has(key)) return this.#known.get(key);
    let ctx: number | undefined;
    let server;
    try {
      server = await startServer({
        command: this.env.serverCommand,
        model: this.env.model,
        flags: config.flags,
        cwd: this.env.cwd,
        startTimeoutMs: this.env.startTimeoutMs,
      });
      ctx = (await modelInfo(server.target, this.env.model)).maxContext;
      this.env.log(
        `[${config.name}] context ${ctx ?? "not reported"} at ${config.flags.join(" ")}`,
      );
    } catch (e) {
      this.env.log(`[${config.name}] context probe failed: ${String(e).split("\n")[0]}`);
    } finally {
      await server?.stop();
    }
    this.#known.set(key, ctx);
    return ctx;
  }
}

/** The replay's deadline: the last arrival (or the window's end, if later) plus the drain. */
export function deadlineMs(workload: WorkloadRequest[], windowS: number, drainS: number): number {
  const last = workload.reduce((m, w) => Math.max(m, w.arrivalS), 0);
  return (Math.max(last, windowS) + drainS) * 1000;
}

/** One server per configuration, in order; results-*.json and server-*.log in `folder`. */
export async function runWorkload(
  workload: WorkloadRequest[],
  configs: ConfigSpec[],
  env: RunEnv,
  folder: string,
  deadline: number,
  tag: string,
): Promise<ConfigResult[]> {
  const results: ConfigResult[] = [];
  for (const config of configs) {
    env.log(`${tag} [${config.name}] ${config.flags.join(" ") || "(defaults)"}`);
    const r = await runConfig(workload, config, {
      model: env.model,
      serverCommand: env.serverCommand,
      cwd: env.cwd,
      startTimeoutMs: env.startTimeoutMs,
      requestTimeoutMs: env.requestTimeoutMs,
      deadlineMs: deadline,
      scrapeIntervalMs: env.scrapeIntervalMs,
      warmupRequests: env.warmupRequests,
      logPath: `${folder}/server-${slug(config.name)}.log`,
    });
    results.push(r);
    await Deno.writeTextFile(`${folder}/results-${slug(config.name)}.json`, JSON.stringify(r));
    const s = r.summary;
    env.log(
      r.error
        ? `${tag} [${config.name}] failed: ${r.error.split("\n")[0]}`
        : `${tag} [${config.name}] ${r.wallS.toFixed(1)} s: ${s!.completed}/${
          s!.requests
        } ok, SLO goodput ${
          s!.sloGoodput === null ? "—" : `${(s!.sloGoodput * 100).toFixed(0)}%`
        }, ${s!.rawTokensPerS?.toFixed(1) ?? "—"} raw tokens/s`,
    );
  }
  return results;
}
