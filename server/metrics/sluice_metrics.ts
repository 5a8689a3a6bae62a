// Sluice's metric set: the names the benchmark scrapes (a contract) and how each is bucketed.

import type { Registry } from "./exposition.ts";

/** Metric names the benchmark scrapes: a contract, keep them exactly. */
export const SLUICE_METRIC_NAMES = {
  requests: "sluice_requests_total",
  ttft: "sluice_ttft_seconds",
  interToken: "sluice_inter_token_seconds",
  queueDepth: "sluice_queue_depth",
  modelLoaded: "sluice_model_loaded",
  modelLoads: "sluice_model_loads_total",
  modelUnloads: "sluice_model_unloads_total",
  runningRequests: "sluice_running_requests",
  pausedRequests: "sluice_paused_requests",
  kvBlocksUsed: "sluice_kv_blocks_used",
  kvBlocksTotal: "sluice_kv_blocks_total",
  tokensGenerated: "sluice_tokens_generated_total",
  stepSeconds: "sluice_step_seconds",
  swaps: "sluice_swaps_total",
  kvBytesMoved: "sluice_kv_bytes_moved_total",
  kvBlocksCached: "sluice_kv_blocks_cached",
  prefixHitBlocks: "sluice_prefix_cache_hit_blocks_total",
  prefixLookupBlocks: "sluice_prefix_cache_lookup_blocks_total",
  preemptions: "sluice_preemptions_total",
  policyPauses: "sluice_policy_pauses_total",
  layerwiseAdmissions: "sluice_layerwise_admissions_total",
  plannerSolves: "sluice_planner_solves_total",
  plannerSolveSeconds: "sluice_planner_solve_seconds",
  stallSeconds: "sluice_stall_seconds_total",
  recomputedTokens: "sluice_recomputed_tokens_total",
  effectiveTokens: "sluice_effective_tokens_total",
  preemptChoices: "sluice_preemption_choices_total",
  connections: "sluice_http_connections",
  connectionsClosed: "sluice_http_connections_closed_total",
  connectionsRefused: "sluice_http_connections_refused_total",
} as const;

// Bucket bounds in seconds. TTFT spans a fast prefill to a long queue under overload; token gaps
// centre on reading rates (15-30 tok/s is 33-67 ms); a step on lavapipe is ms to seconds.
const TTFT_BUCKETS = [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const INTER_TOKEN_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5];
const STEP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
const SOLVE_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

export type SluiceMetrics = ReturnType<typeof createSluiceMetrics>;

/** The server's metric set. Gauges are set by the server, or wired to callbacks with setCollect. */
export function createSluiceMetrics(registry: Registry) {
  const n = SLUICE_METRIC_NAMES;
  const metrics = {
    requests: registry.counter({
      name: n.requests,
      help: "Requests finished, by HTTP status (499: client went away).",
      labelNames: ["status"],
    }),
    ttft: registry.histogram({
      name: n.ttft,
      help: "Time from request arrival to the first token sent, in seconds.",
      buckets: TTFT_BUCKETS,
    }),
    interToken: registry.histogram({
      name: n.interToken,
      help: "Time between consecutive tokens sent to a client, in seconds.",
      buckets: INTER_TOKEN_BUCKETS,
    }),
    connections: registry.gauge({
      name: n.connections,
      help: "Client connections open on the server's port.",
    }),
    connectionsClosed: registry.counter({
      name: n.connectionsClosed,
      help: "Client connections ended, by why (header_timeout: no complete request head in " +
        "time; idle_timeout: keep-alive expired; malformed: bad framing, answered 400/431/408; " +
        "evicted: had sent nothing, closed to admit a new connection at --max-connections).",
      labelNames: ["reason"],
    }),
    connectionsRefused: registry.counter({
      name: n.connectionsRefused,
      help: "Connections answered 503 and closed at once: at --max-connections with every one " +
        "in use, or out of file descriptors.",
      labelNames: ["reason"],
    }),
    modelLoaded: registry.gauge({
      name: n.modelLoaded,
      help: "1 for each model loaded now, 0 for each model the server can load.",
      labelNames: ["model"],
    }),
    modelLoads: registry.counter({
      name: n.modelLoads,
      help: "Models loaded (on demand, pinned or at start).",
    }),
    modelUnloads: registry.counter({
      name: n.modelUnloads,
      help: "Models unloaded (keep-alive ended, evicted for another, or asked to).",
    }),
    queueDepth: registry.gauge({
      name: n.queueDepth,
      help: "Requests waiting for their first admission (paused ones are counted apart).",
    }),
    runningRequests: registry.gauge({
      name: n.runningRequests,
      help: "Requests admitted and not finished.",
    }),
    pausedRequests: registry.gauge({
      name: n.pausedRequests,
      help: "Requests paused with their KV freed; their token buffers keep their streams going.",
    }),
    kvBlocksUsed: registry.gauge({
      name: n.kvBlocksUsed,
      help: "KV cache blocks in use, by tier.",
      labelNames: ["tier"],
    }),
    kvBlocksTotal: registry.gauge({
      name: n.kvBlocksTotal,
      help: "KV cache blocks available, by tier.",
      labelNames: ["tier"],
    }),
    tokensGenerated: registry.counter({
      name: n.tokensGenerated,
      help: "Tokens generated by the engine.",
    }),
    stepSeconds: registry.histogram({
      name: n.stepSeconds,
      help: "Wall time of one engine iteration, in seconds.",
      buckets: STEP_BUCKETS,
    }),
    swaps: registry.counter({
      name: n.swaps,
      help: "KV swaps between device and host, by direction.",
      labelNames: ["direction"],
    }),
    kvBytesMoved: registry.counter({
      name: n.kvBytesMoved,
      help: "KV bytes copied between device and host (swaps and write-through), by direction.",
      labelNames: ["direction"],
    }),
    kvBlocksCached: registry.gauge({
      name: n.kvBlocksCached,
      help: "Device KV blocks the prefix cache keeps that no request holds (evicted on demand).",
    }),
    prefixHitBlocks: registry.counter({
      name: n.prefixHitBlocks,
      help: "Prompt KV blocks found in the prefix cache instead of being computed, by the tier " +
        "they were found on (host: copied back to the device).",
      labelNames: ["tier"],
    }),
    prefixLookupBlocks: registry.counter({
      name: n.prefixLookupBlocks,
      help: "Prompt KV blocks looked up in the prefix cache.",
    }),
    preemptions: registry.counter({
      name: n.preemptions,
      help: "Times a running request was paused (its KV freed) to make room for another.",
    }),
    policyPauses: registry.counter({
      name: n.policyPauses,
      help: "Running requests paused by the scheduling policy (buffer-aware, priorities) or the " +
        "offload planner, not for want of a block; they count in the preemptions too.",
    }),
    layerwiseAdmissions: registry.counter({
      name: n.layerwiseAdmissions,
      help: "Requests admitted with some layers' KV on the host tier (layer-wise prefill, " +
        "--sched slo) because their full KV did not fit on the device.",
    }),
    plannerSolves: registry.counter({
      name: n.plannerSolves,
      help: "Offload planner solves.",
    }),
    plannerSolveSeconds: registry.histogram({
      name: n.plannerSolveSeconds,
      help: "Wall time of one offload planner solve, in seconds.",
      buckets: SOLVE_BUCKETS,
    }),
    stallSeconds: registry.counter({
      name: n.stallSeconds,
      help: "Time clients' token buffers sat empty while a token was due, in seconds.",
    }),
    recomputedTokens: registry.counter({
      name: n.recomputedTokens,
      help:
        "Prefill rows of positions their request had computed before (KV lost to a preemption).",
    }),
    effectiveTokens: registry.counter({
      name: n.effectiveTokens,
      help: "TokenFlow effective tokens of ended requests: each token weighed by its buffer's " +
        "occupancy when generated (1 up to 10% of the request's output, 0 from 20%).",
    }),
    preemptChoices: registry.counter({
      name: n.preemptChoices,
      help: "Preemptions by what became of the victim's KV (swap, drop_oldest, drop_all); with " +
        "--recompute auto, the cost model's choice.",
      labelNames: ["kind"],
    }),
  };
  // Fixed label sets show up at zero from the first scrape, so rates never start from a gap.
  for (const tier of ["device", "host"]) {
    metrics.kvBlocksUsed.ensure({ tier });
    metrics.kvBlocksTotal.ensure({ tier });
    metrics.prefixHitBlocks.ensure({ tier });
  }
  for (const kind of ["swap", "drop_oldest", "drop_all"]) metrics.preemptChoices.ensure({ kind });
  for (const direction of ["out", "in"]) {
    metrics.swaps.ensure({ direction });
    metrics.kvBytesMoved.ensure({ direction });
  }
  return metrics;
}
