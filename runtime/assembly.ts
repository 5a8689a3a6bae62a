// Puts a runtime together over an engine: the scheduler over the chosen preset, with its KV space
// (kv_space.ts: the tiers and mechanisms the preset and options switch on), the cost tracker, the
// step loop. `--sched auto` is resolved first, from the engine's profiled cost model
// (policy/economics.ts). Which options go together is the preset's to say (policy/index.ts),
// checked here against the engine's host tier and cost model before anything is made.

import type { CostModel, EngineInfo, StepEngine } from "../engine/engine.ts";
import { blocksPerLayer } from "../engine/kv/pool_shape.ts";
import { DEFAULT_GROUP_MS } from "./decode_group.ts";
import { CostTracker } from "./cost_tracker.ts";
import type { KvSpace, KvSpaceOptions } from "./kv_space.ts";
import { StepLoop } from "./loop.ts";
import type { RuntimeOptions } from "./options.ts";
import {
  type AutoOption,
  chooseByEconomics,
  type EconomicsChoice,
  widthCost,
} from "./policy/economics.ts";
import { OWN_OPTIONS, placingOf } from "./policy/preset.ts";
import { choosePreset, type PolicyName } from "./policy/index.ts";
import { Scheduler } from "./scheduler.ts";
import {
  DEFAULT_SPECULATIVE_TOKENS,
  type Drafter,
  NGRAM_DRAFTER,
  Speculation,
} from "./speculative/speculation.ts";
import type { StepCosts } from "./speculative/draft_length.ts";

/**
 * Parts a caller makes itself, in place of those the runtime's options would make: OrbitFlow's
 * planner, and the drafter `--speculative` would make (a bench's, of controlled acceptance).
 */
export type RuntimeParts = Pick<KvSpaceOptions, "planner" | "planSource"> & { drafter?: Drafter };

/** A runtime's parts. */
export interface Assembly {
  /** The engine's limits, with the context a request may have once the prefetch region is set aside. */
  info: EngineInfo;
  /** The options, `--sched auto` resolved. */
  options: RuntimeOptions & { policy: PolicyName };
  /** What `--sched auto` chose and why; null when a preset was named. */
  economics: EconomicsChoice | null;
  scheduler: Scheduler;
  /** The scheduler's KV space: both tiers and what moves KV between them. */
  space: KvSpace;
  /** The engine's cost model, re-fitted from observed step times (for planners and reports). */
  costs: CostTracker;
  loop: StepLoop;
}

/** Makes a runtime's parts; throws a RangeError naming an option the engine cannot serve. */
export function assemble(
  engine: StepEngine,
  given: RuntimeOptions,
  parts: RuntimeParts = {},
): Assembly {
  const { options, economics } = resolveAuto(given, engine.info.costModel);
  // A host tier left unused is none, to every part and to the runtime's users.
  const info = options.hostTier === false ? { ...engine.info, hostBlocks: 0 } : engine.info;
  const preset = choosePreset(options.policy, options, {
    hostTier: info.hostBlocks > 0,
    costModel: info.costModel !== undefined,
  });
  const costs = new CostTracker(info.costModel, info.kvBlockBytes);
  const scheduler = new Scheduler({
    kv: {
      shape: info,
      preempt: preset.preempt,
      placing: preset.placing,
      prefixCache: options.prefixCache,
      writeThrough: options.writeThrough,
      swapReuse: options.swapReuse,
      tokenCache: preset.tokenCache,
      orbitWindowMax: options.orbitWindowMax,
      orbitPlan: options.orbitPlan,
      orbitPause: options.orbitPause,
      planner: parts.planner,
      planSource: parts.planSource,
    },
    limits: info,
    policy: preset.policy,
    // Read lazily: re-fitted every step.
    time: { costModel: () => costs.current },
    decodeSteps: {
      max: Math.min(options.decodeSteps ?? 1, info.maxDecodeSteps),
      groupMs: options.decodeGroupMs ?? DEFAULT_GROUP_MS,
    },
    speculation: speculation(options, preset, parts.drafter, {
      model: () => costs.current,
      groupSteps: Math.min(options.decodeSteps ?? 1, info.maxDecodeSteps),
    }),
  });
  const { space } = scheduler;
  const loop = new StepLoop(engine, scheduler, info.ringSize, undefined, (step, ms) => {
    scheduler.groups.observeStepMs(ms);
    costs.observe(step, ms);
    space.planner?.observeStep(step, ms); // drift of measured steps from the plan's prediction
  });
  const region = space.offloader?.regionBlocks ?? 0;
  return {
    info: { ...info, maxContext: contextLimit(info, region) },
    options,
    economics,
    scheduler,
    space,
    costs,
    loop,
  };
}

/** Speculative decoding as the options ask (none when off); refused beside the mechanisms whose
 * books would count a draft row's KV before it is verified. */
function speculation(
  options: RuntimeOptions,
  preset: { tokenCache?: boolean; placing: { offloads: boolean } },
  drafter: Drafter | undefined,
  costs: StepCosts,
): Speculation | undefined {
  if ((options.speculative ?? "off") === "off") return undefined;
  const k = options.speculativeTokens ?? DEFAULT_SPECULATIVE_TOKENS;
  if (!Number.isInteger(k) || k < 1) {
    throw new RangeError(`--num-speculative-tokens ${k}: must be an integer >= 1`);
  }
  if (preset.tokenCache || preset.placing.offloads) {
    throw new RangeError(
      "--speculative is not supported with --token-cache on or offloaded layers",
    );
  }
  return new Speculation(k, drafter ?? NGRAM_DRAFTER, costs);
}

/**
 * The engine's context limit, less what the prefetch region takes from the pool: a request alone
 * must fit with every layer on the device, or it could wait forever.
 */
function contextLimit(info: EngineInfo, region: number): number {
  if (region === 0) return info.maxContext;
  const perLayer = blocksPerLayer(info, info.blocksPerArena.map((n) => n - region));
  return Math.max(0, Math.min(info.maxContext, perLayer * info.blockSize));
}

/** `options` with `--sched auto` resolved against `model`; economics null when a preset was named. */
function resolveAuto(
  options: RuntimeOptions,
  model: CostModel | undefined,
): { options: RuntimeOptions & { policy: PolicyName }; economics: EconomicsChoice | null } {
  if (options.policy !== "auto") {
    return { options: { ...options, policy: options.policy }, economics: null };
  }
  const own = OWN_OPTIONS.find((o) => options[o] !== undefined && options[o] !== false);
  // Offloaded layers live on the host tier: it stays whoever asked for them.
  const given: AutoOption[] = [...options.given ?? []];
  if (placingOf(options).offloads) given.push("hostTier");
  const economics: EconomicsChoice = own === undefined ? chooseByEconomics(model, given) : {
    policy: "tokenflow",
    widthCost: model === undefined ? null : widthCost(model),
    set: { policy: "tokenflow" },
    reason: `an option only tokenflow takes (${own}) names it`,
  };
  return { options: { ...options, ...economics.set, policy: economics.policy }, economics };
}
