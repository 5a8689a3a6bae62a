// A scheduling preset: what one `--sched NAME` means, whole. Ordering, gating, pausing and the
// choice of victims are its SchedulingPolicy's (policy.ts); a preset adds how it preempts (what
// becomes of a victim's KV) and where it places running requests' KV (some layers on the host
// tier, the same distance for all or planned by OrbitFlow's planner; LayerKV's layer-wise
// admission). Each policy file exports its preset's factory, which takes the options below; the
// ones only some presets take (`takes`) are refused by the others (index.ts checks).

import { withPriority } from "./priority.ts";
import type { SchedulingPolicy } from "./policy.ts";

/** What a preempted request's KV becomes, as a fixed choice (`--preempt`). */
export type PreemptKv = "recompute" | "swap" | "partial";

/**
 * How a preset preempts: `fixed` says what a victim's KV becomes (recomputed from its ids, swapped
 * to the host tier, or only its oldest blocks dropped: eLLM); with `auto` (`--recompute auto`)
 * the cost model chooses per victim instead (runtime/preempt_choice.ts).
 */
export interface PreemptRule {
  fixed: PreemptKv;
  auto: boolean;
}

/** The default: recompute, fixed. */
export const RECOMPUTE: PreemptRule = { fixed: "recompute", auto: false };

/** Keeping some layers' KV on the host tier (`--offload`). */
export type OffloadMode = "none" | "uniform" | "orbit";

/** Where a preset places running requests' KV. */
export interface Placing {
  /**
   * "none": every layer on the device; "uniform": every running request at `distance`; "orbit":
   * OrbitFlow's planner picks each request's distance (runtime/plan/orbit_offload.ts).
   */
  offload: OffloadMode;
  /** Uniform's distance (0: every layer on the device). */
  distance: number;
  /** Running requests' layers may live on the host (`offload` with a distance that offloads). */
  offloads: boolean;
  /** LayerKV's layer-wise prefill (runtime/placement.ts). */
  layerwisePrefill: boolean;
  /** Prefetch region blocks per arena (default: one layer's share of the device pool). */
  prefetchBlocks?: number;
}

/** What a preset factory takes: flags every preset shares, and some only one takes. */
export interface PresetOptions {
  /**
   * Order and preempt by each request's priority, aged so that none starves (`--priority`;
   * policy/priority.ts). Default true; false ignores requests' priorities.
   */
  priority?: boolean;
  /**
   * A preempted request's KV (`--preempt`): recomputed from its ids, swapped to the host tier, or
   * only its oldest blocks freed and recomputed (eLLM). Default "recompute".
   */
  preempt?: PreemptKv;
  /**
   * `--recompute`: "auto" chooses, per preempted request, between swapping its KV to the host
   * tier, dropping only its oldest blocks and dropping it all, by the cost model's predicted cost
   * (runtime/preempt_choice.ts); `preempt` is then not consulted. Needs the engine's cost model.
   * Default "off": `preempt` decides.
   */
  recompute?: "off" | "auto";
  /**
   * `--offload` (needs a host tier). Default: "uniform" when `offloadDistance` is given, else
   * "none".
   */
  offload?: OffloadMode;
  /**
   * Offload distance for every running request (`--offload-distance`; 0: every layer on the
   * device; default 2 with `offload: "uniform"`): every d-th layer's KV lives on the host tier and
   * is brought into the prefetch region just before its layer runs.
   */
  offloadDistance?: number;
  /** Prefetch region blocks per arena (`--prefetch-blocks`). */
  prefetchBlocks?: number;
  /** The longest decode window OrbitFlow's planner may choose (`--orbit-window-max`; orbit only). */
  orbitWindowMax?: number;
  /**
   * OrbitFlow's distances (`--orbit-plan`; orbit only): "request" (default) one per request by the
   * ILP; "batch" one for the whole batch (Fig. 14a's Batch-Uniform baseline).
   */
  orbitPlan?: "request" | "batch";
  /**
   * OrbitFlow's Pause-Resume (`--orbit-pause`; orbit only; default true): false never pauses a
   * request for want of a plan (Fig. 14a's steps before "+ Pause-Resume").
   */
  orbitPause?: boolean;
  /**
   * LayerKV's layer-wise prefill (`--layerwise-prefill`; slo and tokenflow, with a host tier):
   * every admission is given a layer split (runtime/layer_split.ts): some layers' KV kept on the
   * device, the rest offloaded as its prefill writes them (runtime/placement.ts). It needs the
   * offloader and its prefetch region, so with `offload: "none"` they are made for it, every
   * other request at distance 0. Default false (the region costs device blocks, and the earlier
   * fallback-only version measured worse on the Policies workload: docs/benchmarks/policies.md).
   */
  layerwisePrefill?: boolean;
  /**
   * eLLM's token-wise caching (`--token-cache`; runtime/token_cache.ts): under memory pressure a
   * running request keeps only its newest tokens' KV and recomputes the rest in each step it
   * decodes, the uncached share chosen every step against the batch size. Default false.
   */
  tokenCache?: boolean;
  /** TokenFlow's μ, the safety factor on predicted switch costs (`--tokenflow-safety`; tokenflow only). */
  tokenflowSafety?: number;
  /** TokenFlow's Δt, seconds between decisions (`--tokenflow-interval-s`; tokenflow only). */
  tokenflowIntervalS?: number;
  /** tokenflow only (runtime/policy/tokenflow.ts): stop admission at the largest batch that keeps
   * up with its fastest reader (`--tokenflow-keep-up`; default false). */
  tokenflowKeepUp?: boolean;
  /** tokenflow only: when the working set reads faster than the adapter makes, admit new requests
   * as memory allows or hold them (`--tokenflow-overload`; default "admit"). */
  tokenflowOverload?: "admit" | "hold";
  /** tokenflow only: a new request past its TTFT SLO is offered admission by slack (before paused
   * requests) or behind the paused ones (`--tokenflow-late`; default "by-slack"). */
  tokenflowLate?: "by-slack" | "behind";
  /** tokenflow only: hold requests back just in time always, or only while none waits
   * (`--tokenflow-hold-back`; default "idle"). */
  tokenflowHoldBack?: "idle" | "always";
}

/** One `--sched` name's policy, made. */
export interface Preset {
  readonly name: string;
  readonly policy: SchedulingPolicy;
  readonly preempt: PreemptRule;
  readonly placing: Placing;
  /** eLLM's token-wise caching of running requests (`tokenCache`). */
  readonly tokenCache?: boolean;
}

/** A preset's factory, and the options beyond the shared ones that it takes. */
export interface PresetEntry {
  make(options: PresetOptions): Preset;
  takes?: readonly OwnOption[];
}

/** Options only some presets take, in the order their problems are reported. */
export const OWN_OPTIONS = [
  "layerwisePrefill",
  "tokenflowSafety",
  "tokenflowIntervalS",
  "tokenflowKeepUp",
  "tokenflowOverload",
  "tokenflowLate",
  "tokenflowHoldBack",
] as const satisfies readonly (keyof PresetOptions)[];
export type OwnOption = (typeof OWN_OPTIONS)[number];

/** A preset over `policy`, with what every preset shares: priorities, preemption, placement. */
export function makePreset(name: string, policy: SchedulingPolicy, o: PresetOptions): Preset {
  return {
    name,
    policy: o.priority === false ? policy : withPriority(policy),
    preempt: { fixed: o.preempt ?? "recompute", auto: o.recompute === "auto" },
    placing: placingOf(o),
    tokenCache: o.tokenCache ?? false,
  };
}

/** Where `o` places KV: the offload mode and distance it asks for, given or implied. */
export function placingOf(o: PresetOptions): Placing {
  const given = o.offloadDistance ?? 0;
  const offload = o.offload ?? (given > 0 ? "uniform" : "none");
  const distance = offload === "uniform" ? o.offloadDistance ?? 2 : 0;
  const layerwisePrefill = o.layerwisePrefill ?? false;
  return {
    offload,
    distance,
    offloads: offload === "orbit" || distance > 0,
    layerwisePrefill,
    prefetchBlocks: o.prefetchBlocks,
  };
}
