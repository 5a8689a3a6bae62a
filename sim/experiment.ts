// One paper experiment in simulation: its setups (workloads), the systems compared (runtime
// options plus the engine limits that stand for a framework's settings), each pair replayed in
// fake time over the paper's GPU profile, summarised by the bench's metrics.

import { type RunSummary, summarize } from "../bench/serve/metrics.ts";
import type { WorkloadRequest } from "../bench/serve/workload.ts";
import type { RuntimeStats } from "../runtime/service.ts";
import { GpuEngine, type GpuEngineLimits } from "./gpu_engine.ts";
import type { SimProfile } from "./gpu_profiles.ts";
import { replay, type ReplayOptions, type SimConfig } from "./replay.ts";

/** A system as Sluice runs it: its runtime options and the engine limits of its framework. */
export interface SimSystem {
  config: SimConfig;
  limits?: GpuEngineLimits;
  /** What it stands for in the paper, and how it differs. */
  about: string;
}

export interface SimSetup {
  id: string;
  about: string;
  workload: WorkloadRequest[];
}

export interface SimOutcome {
  setup: string;
  system: string;
  summary: RunSummary;
  stats: RuntimeStats;
  /** Wall-clock seconds the simulation took. */
  wallS: number;
}

/** Replays every setup on every system, in order; `progress` hears of each as it ends. Clients
 * wait up to an hour unless `clients` says otherwise. */
export async function runExperiment(
  profile: SimProfile,
  setups: readonly SimSetup[],
  systems: readonly SimSystem[],
  progress: (o: SimOutcome) => void = () => {},
  clients: ReplayOptions = {
    maxQueue: 100_000,
    requestTimeoutMs: 3_600_000,
    maxTokensLimit: 65_536,
  },
): Promise<SimOutcome[]> {
  const out: SimOutcome[] = [];
  for (const setup of setups) {
    for (const system of systems) {
      const started = performance.now();
      const { records, stats } = await replay(
        setup.workload,
        () =>
          new GpuEngine(profile, {
            maxContext: 8192,
            ...system.limits,
            hostBlocks: system.config.hostBlocks,
          }),
        system.config,
        clients,
      );
      const outcome: SimOutcome = {
        setup: setup.id,
        system: system.config.name,
        summary: summarize(records),
        stats,
        wallS: (performance.now() - started) / 1000,
      };
      progress(outcome);
      out.push(outcome);
    }
  }
  return out;
}

export const fmt = (x: number | null | undefined, digits = 1): string =>
  x === null || x === undefined || !Number.isFinite(x) ? "–" : x.toFixed(digits);

/** a ÷ b as "1.23×". */
export const times = (a: number | null | undefined, b: number | null | undefined): string =>
  a == null || b == null || b === 0 ? "–" : `${(a / b).toFixed(2)}×`;

/** (a − b) ÷ b as a signed percentage. */
export const change = (a: number | null | undefined, b: number | null | undefined): string =>
  a == null || b == null || b === 0
    ? "–"
    : `${a >= b ? "+" : ""}${((a / b - 1) * 100).toFixed(1)}%`;
