// `--sched auto`, the server's default: which scheduling the adapter's economics favour, read from
// the cost model profiled at load. Where a step's rows cost about what they cost (a software
// adapter: lavapipe here), pausing requests by their readers' buffers (tokenflow) and copying KV
// ahead to the host tier cost nothing a step would not pay anyway, and they measured best on the
// real server (docs/benchmarks/policies.md, the real bench matrix). Where a step of many rows costs
// about what one row costs (a GPU reading its weights once a step), every paused request is a row
// the step would have carried for free, and write-through's copies cross a narrow link: in the
// simulated matrix on the papers' GPU profiles the default lost to vLLM V1's settings in every cell
// (docs/benchmarks/papers.md), so there the server takes those settings.
//
// Only what the user did not set is chosen: a flag given on the command line (`given`) stays, and
// an option only tokenflow takes (its μ, Δt, trade-off rules, LayerKV's layer-wise prefill) names
// tokenflow.

import type { CostModel } from "../../engine/kv/cost_model.ts";
import type { PolicyName } from "./index.ts";
import type { PresetOptions } from "./preset.ts";

/** The decode width compared with one row: a batch most servers reach under load. */
export const WIDE_ROWS = 32;
/**
 * A step of WIDE_ROWS rows costing less than this many one-row steps is a GPU's economics. Measured
 * sides: lavapipe's demo model 3.8× (tests/sim/matrix_sim.ts's costs), the GPU profiles 1.1–1.3×
 * (sim/gpu_step_cost.ts); 2 sits between with room on both.
 */
export const FLAT_RATIO = 2;

/** What auto may set, and what it sets each to. */
export interface AutoSettings {
  policy: PolicyName;
  /** Use the engine's host KV tier (RuntimeOptions.hostTier). */
  hostTier?: boolean;
  writeThrough?: boolean;
  recompute?: "off" | "auto";
  preempt?: PresetOptions["preempt"];
}

/** Options auto may choose; the caller names the ones the user gave (they stay). */
export type AutoOption = Exclude<keyof AutoSettings, "policy">;

/** What auto chose, and why, for the start-up line and /metrics' info. */
export interface EconomicsChoice {
  policy: PolicyName;
  /** A WIDE_ROWS-row step's cost ÷ a one-row step's, from the cost model; null: no cost model. */
  widthCost: number | null;
  /** The options auto set (those the user gave are left out). */
  set: Partial<AutoSettings>;
  /** One line: what was chosen and from what. */
  reason: string;
}

/**
 * Where rows are cheap: vLLM V1's settings (bench/matrix/flags.ts's fcfs-vllm), the host tier left
 * unused as vLLM keeps no KV on the host: on the L20 profile its prefix tier's copies alone doubled
 * the stall of the tight chat cell and raised a document cell's TTFT p99 1.69× (papers.md).
 */
const GPU_SETTINGS: AutoSettings = {
  policy: "fcfs",
  hostTier: false,
  writeThrough: false,
  recompute: "off",
  preempt: "recompute",
};

/** Where rows cost what they cost: the defaults cli/flags.ts documents. */
const SOFTWARE_SETTINGS: AutoSettings = { policy: "tokenflow" };

/** A WIDE_ROWS-row step's layer cost ÷ a one-row step's (the sampler left out: it is per request). */
export function widthCost(model: CostModel): number {
  const { fixedMs, perUnitMs } = model.layer;
  return (fixedMs + WIDE_ROWS * perUnitMs) / Math.max(1e-9, fixedMs + perUnitMs);
}

/** The scheduling `model`'s economics favour, less what `given` holds. */
export function chooseByEconomics(
  model: CostModel | undefined,
  given: readonly AutoOption[] = [],
): EconomicsChoice {
  const ratio = model === undefined ? null : widthCost(model);
  const flat = ratio !== null && ratio < FLAT_RATIO;
  const settings = flat ? GPU_SETTINGS : SOFTWARE_SETTINGS;
  const set: Partial<AutoSettings> = {};
  for (const [k, v] of Object.entries(settings) as [keyof AutoSettings, unknown][]) {
    if (k === "policy" || !given.includes(k)) (set as Record<string, unknown>)[k] = v;
  }
  const measured = ratio === null
    ? "no cost model was profiled"
    : `a ${WIDE_ROWS}-row step costs ${ratio.toFixed(2)}× a one-row step`;
  const reason = flat
    ? `${measured} (under ${FLAT_RATIO}×: a GPU's economics), so vLLM V1's settings: fcfs, ` +
      "preempted KV recomputed, no KV on the host"
    : `${measured}${
      ratio === null ? "" : ` (${FLAT_RATIO}× or more: rows cost what they cost)`
    }, ` +
      "so tokenflow, the defaults measured best where rows cost what they cost";
  return { policy: settings.policy, widthCost: ratio, set, reason };
}
