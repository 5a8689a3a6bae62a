// Puts a runtime together over an engine: the device pool and, as the options and the engine allow,
// the prefix cache, the host tier with its swaps and the cache's copies, the offloader and its
// prefetch region, OrbitFlow's planner; the scheduler over the chosen preset; the cost tracker; the
// step loop. Which options go together is the preset's to say (policy/index.ts), checked here
// against the engine's host tier and cost model before anything is made.

import type { EngineInfo, StepEngine } from "../engine/engine.ts";
import { blocksPerLayer } from "../engine/kv/pool_shape.ts";
import { DEFAULT_GROUP_MS } from "./decode_group.ts";
import { CostTracker } from "./cost_tracker.ts";
import { BlockPool } from "./kv/block_pool.ts";
import { HostTier } from "./kv/host_tier.ts";
import { Offloader } from "./kv/offload.ts";
import { PrefixIndex } from "./kv/prefix_index.ts";
import { PrefixTier } from "./kv/prefix_tier.ts";
import { Swapper } from "./kv/swap.ts";
import { StepLoop } from "./loop.ts";
import type { RuntimeOptions } from "./options.ts";
import { Placement } from "./placement.ts";
import { OrbitOffload } from "./plan/orbit_offload.ts";
import { choosePreset } from "./policy/index.ts";
import type { Placing } from "./policy/preset.ts";
import { PrefixCache } from "./prefix_cache.ts";
import type { Request } from "./request/request.ts";
import { Scheduler } from "./scheduler.ts";

/** Full blocks (per layer) written through per request per step: small copies beside each step. */
const WRITE_THROUGH_BLOCKS = 4;

/** A runtime's parts. The nullable ones exist only when the options and the engine call for them. */
export interface Assembly {
  /** The engine's limits, with the context a request may have once the prefetch region is set aside. */
  info: EngineInfo;
  pool: BlockPool;
  prefix: PrefixIndex | null;
  host: HostTier | null;
  swapper: Swapper | null;
  prefixTier: PrefixTier | null;
  offloader: Offloader | null;
  planner: OrbitOffload | null;
  scheduler: Scheduler;
  /** The engine's cost model, re-fitted from observed step times (for planners and reports). */
  costs: CostTracker;
  loop: StepLoop;
}

/** Makes a runtime's parts; throws a RangeError naming an option the engine cannot serve. */
export function assemble(engine: StepEngine, options: RuntimeOptions): Assembly {
  const info = engine.info;
  const preset = choosePreset(options.policy, options, {
    hostTier: info.hostBlocks > 0,
    costModel: info.costModel !== undefined,
  });
  const { placing } = preset;
  const pool = new BlockPool(info);
  const prefix = options.prefixCache ? new PrefixIndex(pool) : null;
  const host = info.hostBlocks > 0 ? new HostTier(pool, info.hostBlocks) : null;
  // The prefetch region is set aside now, before anyone holds a block.
  const offloader = placing.offloads || placing.layerwisePrefill
    ? new Offloader(pool, host!, placing.prefetchBlocks ?? Math.ceil(pool.total / info.numLayers))
    : null;
  const costs = new CostTracker(info.costModel, info.kvBlockBytes);
  const planner = placing.offload === "orbit"
    ? new OrbitOffload({
      info,
      pool,
      region: offloader!,
      // Read at each re-plan: re-fitted every step.
      costs: () => costs.current,
      maxWindow: options.orbitWindowMax,
    })
    : null;
  const swapper = host ? new Swapper(host, options.swapReuse ?? true) : null;
  const prefixTier = prefix && host ? new PrefixTier(prefix, host) : null;
  const prefixCache = prefix ? new PrefixCache(prefix, pool) : null;
  const scheduler = new Scheduler({
    pool,
    limits: info,
    policy: preset.policy,
    preempt: preset.preempt,
    tokenCache: preset.tokenCache,
    slidingWindow: info.slidingWindow,
    prefixCache,
    host: host && swapper
      ? {
        tier: host,
        swaps: swapper,
        writeThroughBlocks: options.writeThrough ? WRITE_THROUGH_BLOCKS : 0,
      }
      : null,
    placement: offloader
      ? new Placement(pool, offloader, info.maxRows, {
        distance: uniformDistance(placing),
        planner: planner ?? undefined,
        layerwisePrefill: placing.layerwisePrefill,
      }, prefixCache)
      : null,
    // Read lazily: re-fitted every step.
    costModel: () => costs.current,
    kvBlockBytes: info.kvBlockBytes,
    decodeSteps: {
      max: Math.min(options.decodeSteps ?? 1, info.maxDecodeSteps),
      groupMs: options.decodeGroupMs ?? DEFAULT_GROUP_MS,
    },
  });
  const loop = new StepLoop(engine, scheduler, info.ringSize, undefined, (step, ms) => {
    scheduler.observeStepMs(ms);
    costs.observe(step, ms);
    planner?.observeStep(step, ms); // drift of measured steps from the plan's prediction
  });
  return {
    info: { ...info, maxContext: contextLimit(info, offloader?.regionBlocks ?? 0) },
    pool,
    prefix,
    host,
    swapper,
    prefixTier,
    offloader,
    planner,
    scheduler,
    costs,
    loop,
  };
}

/** Uniform's distance for each running request; undefined: none (every layer on the device). */
function uniformDistance({ distance }: Placing): ((req: Request) => number) | undefined {
  if (typeof distance === "function") {
    return (req) => distance({ id: req.id, generated: req.generated.length });
  }
  return distance > 0 ? () => distance : undefined;
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
