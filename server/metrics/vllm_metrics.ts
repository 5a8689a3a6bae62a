// The vLLM metric names that routers and dashboards read (vLLM's production stack, llm-d's
// inference scheduler, vLLM's Grafana dashboard), exported beside Sluice's own so those tools work
// unchanged. Names, types, the `model_name` label and histogram buckets are vLLM's (v1 engine).
// Colons are valid in metric names ([a-zA-Z_:][a-zA-Z0-9_:]*); Prometheus reserves them for
// recording rules by convention, and vLLM uses them anyway, so these names keep them.

import type { Registry } from "./exposition.ts";

/** vLLM's metric names: a contract with tools built for vLLM, keep them exactly. */
export const VLLM_METRIC_NAMES = {
  running: "vllm:num_requests_running",
  waiting: "vllm:num_requests_waiting",
  kvCacheUsage: "vllm:kv_cache_usage_perc",
  ttft: "vllm:time_to_first_token_seconds",
  interToken: "vllm:inter_token_latency_seconds",
  e2e: "vllm:e2e_request_latency_seconds",
  preemptions: "vllm:num_preemptions_total",
  specDrafts: "vllm:spec_decode_num_drafts_total",
  specDraftTokens: "vllm:spec_decode_num_draft_tokens_total",
  specAcceptedTokens: "vllm:spec_decode_num_accepted_tokens_total",
  specAcceptedPerPos: "vllm:spec_decode_num_accepted_tokens_per_pos_total",
} as const;

// vLLM's bucket bounds, so recording rules and dashboards written for vLLM read the same buckets.
const TTFT_BUCKETS = [
  0.001,
  0.005,
  0.01,
  0.02,
  0.04,
  0.06,
  0.08,
  0.1,
  0.25,
  0.5,
  0.75,
  1,
  2.5,
  5,
  7.5,
  10,
  20,
  40,
  80,
  160,
  640,
  2560,
];
const INTER_TOKEN_BUCKETS = [
  0.01,
  0.025,
  0.05,
  0.075,
  0.1,
  0.15,
  0.2,
  0.3,
  0.4,
  0.5,
  0.75,
  1,
  2.5,
  5,
  7.5,
  10,
  20,
  40,
  80,
];
const E2E_BUCKETS = [
  0.3,
  0.5,
  0.8,
  1,
  1.5,
  2,
  2.5,
  5,
  10,
  15,
  20,
  30,
  40,
  50,
  60,
  120,
  240,
  480,
  960,
  1920,
  7680,
];

export type VllmMetrics = ReturnType<typeof createVllmMetrics>;

/** vLLM's metric set, every series labelled with the served model's name. */
export function createVllmMetrics(registry: Registry, modelName: string) {
  const n = VLLM_METRIC_NAMES;
  const labelNames = ["model_name"];
  const metrics = {
    running: registry.gauge({
      name: n.running,
      help: "Requests running on the engine (admitted, not paused, not finished).",
      labelNames,
    }),
    waiting: registry.gauge({
      name: n.waiting,
      help: "Requests waiting for the engine: not yet admitted, or paused (preempted) to resume.",
      labelNames,
    }),
    kvCacheUsage: registry.gauge({
      name: n.kvCacheUsage,
      help: "Device KV cache usage: blocks held by requests over all blocks. 1 means 100 percent.",
      labelNames,
    }),
    ttft: registry.histogram({
      name: n.ttft,
      help: "Time from request arrival to its first token sent to the client, in seconds.",
      buckets: TTFT_BUCKETS,
      labelNames,
    }),
    interToken: registry.histogram({
      name: n.interToken,
      help: "Time between consecutive tokens sent to a client (after pacing), in seconds.",
      buckets: INTER_TOKEN_BUCKETS,
      labelNames,
    }),
    e2e: registry.histogram({
      name: n.e2e,
      help: "Time from arrival to the end of a completed generation request, in seconds.",
      buckets: E2E_BUCKETS,
      labelNames,
    }),
    preemptions: registry.counter({
      name: n.preemptions,
      help: "Times a running request was preempted (paused, its KV freed) for another.",
      labelNames,
    }),
    specDrafts: registry.counter({
      name: n.specDrafts,
      help: "Speculative decoding: runs of draft tokens verified (one per request and step).",
      labelNames,
    }),
    specDraftTokens: registry.counter({
      name: n.specDraftTokens,
      help: "Speculative decoding: draft tokens proposed and verified.",
      labelNames,
    }),
    specAcceptedTokens: registry.counter({
      name: n.specAcceptedTokens,
      help: "Speculative decoding: draft tokens accepted.",
      labelNames,
    }),
  };
  // Per draft position: labelled by position too (position 0's series from the first scrape).
  const specAcceptedPerPos = registry.counter({
    name: n.specAcceptedPerPos,
    help: "Speculative decoding: draft tokens accepted at each draft position (0: the first).",
    labelNames: [...labelNames, "position"],
  });
  // A model's series show up at zero from the first scrape, as vLLM's do.
  const ensure = (name: string) => {
    for (const metric of Object.values(metrics)) metric.ensure({ model_name: name });
    specAcceptedPerPos.ensure({ model_name: name, position: "0" });
  };
  ensure(modelName);
  return { ...metrics, specAcceptedPerPos, ensure };
}
