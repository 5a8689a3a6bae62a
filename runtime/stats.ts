// What the runtime reports (`Runtime.stats()`, the /metrics endpoint, benchmarks): its queues,
// both tiers' blocks, the KV moved between them, the scheduler's counters, and each live request
// with its buffer. Read from the parts (assembly.ts) at the moment asked; nothing here is kept.

import type { Assembly } from "./assembly.ts";
import type { KvSpace } from "./kv_space.ts";
import type { OffloadStats } from "./kv/offload.ts";
import type { PrefixStats } from "./kv/prefix_index.ts";
import type { SwapStats } from "./kv/swap.ts";
import type { PlannerStats } from "./plan/orbit_offload.ts";
import type { Request, RequestState } from "./request/request.ts";
import type { PacerOccupancy } from "./request/token_buffer.ts";
import type { TokenCached } from "./token_cached.ts";
import type { SpeculationStats } from "./speculative/speculation.ts";
import type { Scheduler } from "./scheduler.ts";

export interface RequestStats {
  id: number;
  state: RequestState;
  generated: number;
  preemptions: number;
  priority: number;
  /** Tokens deposited in its buffer and not yet taken by the reader, and their playout seconds. */
  buffered: PacerOccupancy;
}

export interface RuntimeStats {
  waiting: number;
  /** Requests preempted (their KV freed or moved) that wait to resume; their streams play on. */
  paused: number;
  running: number;
  /** Device blocks held by requests. */
  kvBlocksUsed: number;
  /** Device blocks the prefix cache keeps that no request holds (evicted before anyone waits). */
  kvBlocksCached: number;
  kvBlocksTotal: number;
  /** Host tier blocks holding some request's KV, and the tier's size (0 without one). */
  hostBlocksUsed: number;
  hostBlocksTotal: number;
  /** Host tier blocks the prefix cache keeps that no request holds (evicted before anyone waits). */
  hostBlocksCached: number;
  swaps: SwapStats | null;
  /** Offload distance work (null without offloading). */
  offload: OffloadStats | null;
  /** The offload planner's solves (only with `offload: "orbit"`). */
  planner?: PlannerStats;
  /** KV bytes copied to the host (swap-outs, write-through) and back. */
  kvBytesMoved: { out: number; in: number };
  prefix: PrefixStats | null;
  steps: number;
  tokensGenerated: number;
  preemptions: number;
  /** Preempted requests resumed by computing only their dropped oldest KV again. */
  partialResumes: number;
  /** KV table entries freed because they fell behind a sliding window (per layer, summed). */
  windowReleasedBlocks: number;
  /** Running requests paused by the policy or the offload planner, not for want of a block. */
  policyPauses: number;
  /**
   * Requests admitted by layer-wise prefill (some layers offloaded) as their full KV did not fit;
   * only with `layerwisePrefill`.
   */
  layerwiseAdmissions?: number;
  /** Admissions given a layer split, whole ones included; only with `layerwisePrefill`. */
  prefillSplits?: number;
  /**
   * eLLM's token-wise caching (only with `tokenCache`): times running requests left more of their
   * KV uncached and took some back, recompute rows of uncached positions, and the uncached ratio
   * the rule chose last.
   */
  tokenCache?: { uncachings: number; recachings: number; recomputeRows: number; ratio: number };
  /**
   * Preemptions by what became of the victim's KV (with `recompute: "auto"`, the cost model's
   * choice): swapped to the host, its oldest blocks dropped, or all dropped. They add up to
   * `preemptions`.
   */
  preemptChoices: { swap: number; dropOldest: number; dropAll: number };
  /** Prefill rows of positions their request had computed before (KV lost to a preemption). */
  recomputedTokens: number;
  /**
   * Speculative decoding's counters (vLLM's spec_decode_*), only with `--speculative`: draft runs
   * verified, draft tokens, drafts accepted, and accepted per draft position.
   */
  speculation?: SpeculationStats;
  /**
   * TokenFlow's effective tokens of the requests that have ended (runtime/effective_tokens.ts):
   * each token weighed by its buffer's occupancy when it was deposited.
   */
  effectiveTokens: number;
  requests: RequestStats[];
}

/**
 * The runtime's figures now. `streams`: requests whose buffers may still play out after their
 * generation ended; `effectiveTokens`: the sum over the requests that have ended;
 * `layerwise`: report layer-wise admissions (only with layer-wise prefill).
 */
export function runtimeStats(
  a: Assembly,
  streams: Iterable<Request>,
  effectiveTokens: number,
  layerwise: boolean,
): RuntimeStats {
  const { scheduler, space, loop } = a;
  const { pool, host } = space;
  // Requests still generating, then finished ones whose buffers are still playing out.
  const live = new Set([...scheduler.running, ...scheduler.waiting]);
  const playing = [...streams].filter((r) => !live.has(r) && !r.buffer.finished);
  const all = [...live, ...playing];
  return {
    waiting: scheduler.waiting.filter((r) => r.state === "waiting").length,
    paused: scheduler.waiting.filter((r) => r.state === "paused").length,
    running: scheduler.running.length,
    kvBlocksUsed: pool.used - pool.idle - (space.offloader?.regionTotal ?? 0),
    kvBlocksCached: pool.idle,
    kvBlocksTotal: pool.total,
    hostBlocksUsed: host ? host.pool.used - host.pool.idle : 0,
    hostBlocksTotal: host?.pool.total ?? 0,
    hostBlocksCached: host?.pool.idle ?? 0,
    swaps: space.swapper ? { ...space.swapper.stats } : null,
    offload: space.offloader ? { ...space.offloader.stats } : null,
    ...(space.planner ? { planner: { ...space.planner.stats(), lazyPause: space.removable } } : {}),
    kvBytesMoved: kvBytesMoved(space, a.info.kvBlockBytes),
    prefix: space.prefixIndex?.stats() ?? null,
    steps: loop.steps,
    tokensGenerated: loop.tokens,
    preemptions: scheduler.preemptions,
    partialResumes: space.partialResumes,
    windowReleasedBlocks: space.window?.released ?? 0,
    policyPauses: scheduler.policyPauses,
    ...(layerwise
      ? {
        layerwiseAdmissions: scheduler.space.layerwiseAdmissions,
        prefillSplits: scheduler.space.prefillSplits,
      }
      : {}),
    ...(space.tokenCached ? { tokenCache: tokenCacheStats(space.tokenCached) } : {}),
    preemptChoices: { ...space.preemptChoices },
    recomputedTokens: scheduler.recomputedTokens,
    ...(scheduler.speculation.k > 0 ? { speculation: speculationStats(scheduler) } : {}),
    effectiveTokens,
    requests: all.map((r) => ({
      id: r.id,
      state: r.state,
      generated: r.generated.length,
      preemptions: r.preemptions,
      priority: r.priority,
      buffered: r.buffer.occupancy(),
    })),
  };
}

function tokenCacheStats(t: TokenCached): NonNullable<RuntimeStats["tokenCache"]> {
  return {
    uncachings: t.uncachings,
    recachings: t.recachings,
    recomputeRows: t.rows,
    ratio: t.last?.ratio ?? 0,
  };
}

/** KV bytes copied to the host tier and back, by swaps, offloaded layers and the prefix cache. */
function kvBytesMoved(space: KvSpace, bytes: number): { out: number; in: number } {
  const sw = space.swapper?.stats;
  if (!sw) return { out: 0, in: 0 };
  const off = space.offloader?.stats;
  const cache = space.prefixTier?.stats;
  const out = sw.blocksOut + sw.blocksWrittenThrough + (off?.blocksOut ?? 0) +
    (cache?.blocksOut ?? 0);
  const into = sw.blocksIn + (off ? off.blocksPrefetched + off.blocksRestored : 0) +
    (cache?.blocksIn ?? 0);
  return { out: out * bytes, in: into * bytes };
}

function speculationStats({ speculation }: Scheduler): SpeculationStats {
  const s = speculation.stats;
  return { ...s, acceptedPerPos: [...s.acceptedPerPos] };
}
