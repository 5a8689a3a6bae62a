// The scheduling presets by flag name (`--sched`), and the one place that says which options go
// together: the command line checks its flags with presetProblems() before anything loads (a host
// tier is then `--host-kv-mb` > 0, the cost model not known yet), the runtime checks its options
// with it against the engine it got, and makes its preset with choosePreset(). A new policy is a
// file exporting its PresetEntry, and a line here.

import { fcfs } from "./fcfs.ts";
import { layerkv } from "./layerkv.ts";
import { reserve } from "./reserve.ts";
import { slo } from "./slo.ts";
import { tokenflow } from "./tokenflow.ts";
import {
  OWN_OPTIONS,
  placingOf,
  type Preset,
  type PresetEntry,
  type PresetOptions,
} from "./preset.ts";

export type { Preset, PresetOptions };
export type { SchedulingPolicy } from "./policy.ts";

export const PRESETS = { fcfs, reserve, slo, layerkv, tokenflow } satisfies Record<
  string,
  PresetEntry
>;
export type PolicyName = keyof typeof PRESETS;

/** What the memory tiers offer a preset. */
export interface Tiers {
  /** A host KV tier exists (before load: `--host-kv-mb` > 0). */
  hostTier: boolean;
  /** The engine has a cost model; undefined: not known yet (before load). */
  costModel?: boolean;
}

/** An option that does not go with the others. */
export interface Problem {
  option: keyof PresetOptions;
  /** The option as the command line names it, without the dashes (optionFlag). */
  flag: string;
  message: string;
  /**
   * The option would only be ignored: the command line refuses it (a flag that does nothing is a
   * mistake), the runtime goes on without it.
   */
  ignored?: true;
}

/**
 * A preset option's flag: its name in kebab-case (`offloadDistance` is `--offload-distance`), the
 * one rule that lets the runtime's errors name what the user typed without knowing the command
 * line (cli/flags.ts's rows keep to it: tests/cli/flag_table_test.ts).
 */
export function optionFlag(option: keyof PresetOptions): string {
  return option.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase());
}

/** Everything wrong with `options` for preset `name` over `tiers`, in flag order. */
export function presetProblems(name: PolicyName, options: PresetOptions, tiers: Tiers): Problem[] {
  const problems: Problem[] = [];
  const problem = (option: keyof PresetOptions, message: string, ignored?: true) =>
    problems.push({ option, flag: optionFlag(option), message, ...(ignored ? { ignored } : {}) });
  const p = placingOf(options);
  if (p.offloads && !tiers.hostTier) {
    problem("offload", `${p.offload} needs a host KV tier: pass --host-kv-mb MB`);
  }
  if (options.offloadDistance !== undefined && p.offload !== "uniform") {
    problem("offloadDistance", "is the distance of --offload uniform", true);
  }
  // Options only some presets take.
  const entry: PresetEntry = PRESETS[name];
  for (const own of OWN_OPTIONS) {
    const value = options[own];
    if (value === undefined || value === false || entry.takes?.includes(own)) continue;
    const takers = Object.entries(PRESETS).filter(([, e]) =>
      (e as PresetEntry).takes?.includes(own)
    )
      .map(([n]) => n);
    problem(own, `is part of --sched ${takers.join(" or ")}`);
  }
  if (options.preempt === "swap" && !tiers.hostTier) {
    problem("preempt", "swap needs a host KV tier: pass --host-kv-mb MB", true);
  }
  if (p.layerwisePrefill && !tiers.hostTier) {
    problem("layerwisePrefill", "needs a host KV tier: pass --host-kv-mb MB");
  }
  // Layer-wise prefill brings its offloaded layers in through the prefetch region too.
  if (options.prefetchBlocks !== undefined && p.offload === "none" && !p.layerwisePrefill) {
    problem("prefetchBlocks", "needs --offload uniform or orbit, or --layerwise-prefill", true);
  }
  if (options.orbitWindowMax !== undefined && p.offload !== "orbit") {
    problem("orbitWindowMax", "caps the planning window of --offload orbit", true);
  }
  if (options.orbitPlan !== undefined && p.offload !== "orbit") {
    problem("orbitPlan", "chooses how --offload orbit plans", true);
  }
  if (options.orbitPause !== undefined && p.offload !== "orbit") {
    problem("orbitPause", "switches the pauses of --offload orbit", true);
  }
  // --preempt is the fixed choice that --recompute auto replaces: both at once is a mistake.
  if (options.recompute === "auto" && (options.preempt ?? "recompute") !== "recompute") {
    problem("preempt", "is chosen per request by --recompute auto; pass one or the other", true);
  }
  // Token-wise caching shares one scratch block between every layer of a request: a layer whose
  // KV lives on the host cannot take part, and such requests would never be token-cached.
  if (options.tokenCache && (p.offloads || p.layerwisePrefill)) {
    problem(
      "tokenCache",
      "cannot work with layers offloaded to the host: drop --offload or --layerwise-prefill",
    );
  }
  if (tiers.costModel === false) {
    if (p.offload === "orbit") {
      problem("offload", "orbit needs the engine's cost model (profiled at load)");
    }
    if (options.recompute === "auto") {
      problem("recompute", "auto needs the engine's cost model (profiled at load)");
    }
  }
  return problems;
}

/**
 * Preset `name` made with `options`; throws a RangeError naming the first option that cannot work
 * over `tiers` (options that would only be ignored are).
 */
export function choosePreset(name: PolicyName, options: PresetOptions, tiers: Tiers): Preset {
  const entry: PresetEntry | undefined = PRESETS[name];
  if (!entry) throw new RangeError(`--sched: no policy named ${name}`);
  const fatal = presetProblems(name, options, tiers).find((p) => !p.ignored);
  if (fatal) throw new RangeError(`--${fatal.flag}: ${fatal.message}`);
  return entry.make(options);
}
