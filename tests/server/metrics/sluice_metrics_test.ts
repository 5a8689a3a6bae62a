// The server's metric sets: Sluice's (the contracted names, types and labels the benchmark
// scrapes) and vLLM's (the names routers and dashboards built for vLLM read), rendered together as
// /metrics serves them.

import { parsePrometheus } from "../../../bench/serve/prometheus.ts";
import { Registry } from "../../../server/metrics/exposition.ts";
import { parsePrometheusText, sampleValue } from "../../../server/metrics/parse.ts";
import {
  createSluiceMetrics,
  SLUICE_METRIC_NAMES,
} from "../../../server/metrics/sluice_metrics.ts";
import { createVllmMetrics, VLLM_METRIC_NAMES } from "../../../server/metrics/vllm_metrics.ts";
import { assertEquals } from "../../helpers/testing.ts";

Deno.test("metrics: the Sluice and vLLM metric sets have the contracted names, types and labels", () => {
  const registry = new Registry();
  const m = createSluiceMetrics(registry);
  const v = createVllmMetrics(registry, "my-model");
  const text = registry.render();
  const types = new Map(
    [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((match) => [match[1], match[2]]),
  );
  assertEquals(
    types,
    new Map([
      ["sluice_requests_total", "counter"],
      ["sluice_ttft_seconds", "histogram"],
      ["sluice_inter_token_seconds", "histogram"],
      ["sluice_queue_depth", "gauge"],
      ["sluice_model_loaded", "gauge"],
      ["sluice_model_loads_total", "counter"],
      ["sluice_model_unloads_total", "counter"],
      ["sluice_running_requests", "gauge"],
      ["sluice_paused_requests", "gauge"],
      ["sluice_kv_blocks_used", "gauge"],
      ["sluice_kv_blocks_total", "gauge"],
      ["sluice_tokens_generated_total", "counter"],
      ["sluice_step_seconds", "histogram"],
      ["sluice_swaps_total", "counter"],
      ["sluice_kv_bytes_moved_total", "counter"],
      ["sluice_kv_blocks_cached", "gauge"],
      ["sluice_prefix_cache_hit_blocks_total", "counter"],
      ["sluice_prefix_cache_lookup_blocks_total", "counter"],
      ["sluice_preemptions_total", "counter"],
      ["sluice_policy_pauses_total", "counter"],
      ["sluice_layerwise_admissions_total", "counter"],
      ["sluice_planner_solves_total", "counter"],
      ["sluice_planner_solve_seconds", "histogram"],
      ["sluice_stall_seconds_total", "counter"],
      ["sluice_recomputed_tokens_total", "counter"],
      ["sluice_effective_tokens_total", "counter"],
      ["sluice_preemption_choices_total", "counter"],
      ["sluice_http_connections", "gauge"],
      ["sluice_http_connections_closed_total", "counter"],
      ["sluice_http_connections_refused_total", "counter"],
      ["vllm:num_requests_running", "gauge"],
      ["vllm:num_requests_waiting", "gauge"],
      ["vllm:kv_cache_usage_perc", "gauge"],
      ["vllm:time_to_first_token_seconds", "histogram"],
      ["vllm:inter_token_latency_seconds", "histogram"],
      ["vllm:e2e_request_latency_seconds", "histogram"],
      ["vllm:num_preemptions_total", "counter"],
      ["vllm:spec_decode_num_drafts_total", "counter"],
      ["vllm:spec_decode_num_draft_tokens_total", "counter"],
      ["vllm:spec_decode_num_accepted_tokens_total", "counter"],
      ["vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter"],
    ]),
  );
  assertEquals(
    new Set([...Object.values(SLUICE_METRIC_NAMES), ...Object.values(VLLM_METRIC_NAMES)]),
    new Set(types.keys()),
  );
  // Every HELP line is present and non-empty.
  assertEquals([...text.matchAll(/^# HELP \S+ \S.*$/gm)].length, 41);
  // vLLM's series carry the model_name label from the first scrape, at zero.
  const fresh = parsePrometheusText(text);
  for (const name of Object.values(VLLM_METRIC_NAMES)) {
    const sample = fresh.has(name) ? name : `${name}_count`;
    assertEquals(sampleValue(fresh, sample, { model_name: "my-model" }), 0, name);
    for (const s of fresh.get(sample)!) assertEquals(s.labels.model_name, "my-model");
  }

  m.requests.inc({ status: "200" });
  m.requests.inc({ status: "200" });
  m.requests.inc({ status: "429" });
  m.ttft.observe(0.2);
  m.interToken.observe(0.05);
  m.queueDepth.set(3);
  m.runningRequests.set(2);
  m.pausedRequests.set(4);
  m.kvBlocksUsed.setCollect((g) => {
    g.set({ tier: "device" }, 120);
    g.set({ tier: "host" }, 40);
  });
  m.kvBlocksTotal.set({ tier: "device" }, 256);
  m.tokensGenerated.inc(17);
  m.stepSeconds.observe(0.03);
  m.swaps.inc({ direction: "out" }, 2);
  m.preemptions.inc();
  m.plannerSolves.inc();
  m.plannerSolveSeconds.observe(0.004);
  m.stallSeconds.inc(0.7);
  m.recomputedTokens.inc(12);
  m.effectiveTokens.inc(9.5);
  m.preemptChoices.inc({ kind: "drop_oldest" }, 2);
  const model = { model_name: "my-model" };
  v.running.set(model, 2);
  v.waiting.set(model, 7);
  v.kvCacheUsage.set(model, 0.25);
  v.ttft.observe(model, 0.2);
  v.interToken.observe(model, 0.05);
  v.e2e.observe(model, 3);
  v.preemptions.inc(model, 2);

  const s = parsePrometheusText(registry.render());
  assertEquals(sampleValue(s, "sluice_requests_total", { status: "200" }), 2);
  assertEquals(sampleValue(s, "sluice_requests_total"), 3);
  assertEquals(sampleValue(s, "sluice_requests_total", { status: "500" }), undefined);
  assertEquals(sampleValue(s, "sluice_ttft_seconds_count"), 1);
  assertEquals(sampleValue(s, "sluice_ttft_seconds_bucket", { le: "0.1" }), 0);
  assertEquals(sampleValue(s, "sluice_ttft_seconds_bucket", { le: "0.25" }), 1);
  assertEquals(sampleValue(s, "sluice_inter_token_seconds_sum"), 0.05);
  assertEquals(sampleValue(s, "sluice_queue_depth"), 3);
  assertEquals(sampleValue(s, "sluice_running_requests"), 2);
  assertEquals(sampleValue(s, "sluice_paused_requests"), 4);
  assertEquals(sampleValue(s, "sluice_kv_blocks_used", { tier: "device" }), 120);
  assertEquals(sampleValue(s, "sluice_kv_blocks_used", { tier: "host" }), 40);
  assertEquals(sampleValue(s, "sluice_kv_blocks_total", { tier: "device" }), 256);
  assertEquals(sampleValue(s, "sluice_kv_blocks_total", { tier: "host" }), 0); // ensured at 0
  assertEquals(sampleValue(s, "sluice_tokens_generated_total"), 17);
  assertEquals(sampleValue(s, "sluice_step_seconds_count"), 1);
  assertEquals(sampleValue(s, "sluice_swaps_total", { direction: "out" }), 2);
  assertEquals(sampleValue(s, "sluice_swaps_total", { direction: "in" }), 0);
  assertEquals(sampleValue(s, "sluice_preemptions_total"), 1);
  assertEquals(sampleValue(s, "sluice_planner_solves_total"), 1);
  assertEquals(sampleValue(s, "sluice_planner_solve_seconds_bucket", { le: "0.005" }), 1);
  assertEquals(sampleValue(s, "sluice_stall_seconds_total"), 0.7);
  assertEquals(sampleValue(s, "sluice_recomputed_tokens_total"), 12);
  assertEquals(sampleValue(s, "sluice_effective_tokens_total"), 9.5);
  assertEquals(sampleValue(s, "sluice_preemption_choices_total", { kind: "drop_oldest" }), 2);
  assertEquals(sampleValue(s, "sluice_preemption_choices_total", { kind: "swap" }), 0);
  assertEquals(sampleValue(s, "vllm:num_requests_running", model), 2);
  assertEquals(sampleValue(s, "vllm:num_requests_waiting", model), 7);
  assertEquals(sampleValue(s, "vllm:kv_cache_usage_perc", model), 0.25);
  // vLLM's bucket bounds: 0.1 and 0.25 around a 0.2 s TTFT, 0.05 inclusive for the token gap.
  assertEquals(sampleValue(s, "vllm:time_to_first_token_seconds_bucket", { le: "0.1" }), 0);
  assertEquals(sampleValue(s, "vllm:time_to_first_token_seconds_bucket", { le: "0.25" }), 1);
  assertEquals(sampleValue(s, "vllm:time_to_first_token_seconds_bucket", { le: "2560" }), 1);
  assertEquals(sampleValue(s, "vllm:inter_token_latency_seconds_bucket", { le: "0.05" }), 1);
  assertEquals(sampleValue(s, "vllm:e2e_request_latency_seconds_bucket", { le: "2.5" }), 0);
  assertEquals(sampleValue(s, "vllm:e2e_request_latency_seconds_bucket", { le: "5" }), 1);
  assertEquals(sampleValue(s, "vllm:e2e_request_latency_seconds_sum", model), 3);
  assertEquals(sampleValue(s, "vllm:num_preemptions_total", model), 2);
  // The benchmark's own parser reads the colon names too.
  const benchSamples = parsePrometheus(registry.render());
  const running = benchSamples.find((b) => b.name === "vllm:num_requests_running");
  assertEquals(running, { name: "vllm:num_requests_running", labels: model, value: 2 });
  assertEquals(
    benchSamples.filter((b) => b.name === "vllm:time_to_first_token_seconds_bucket").length,
    23,
  );
});
