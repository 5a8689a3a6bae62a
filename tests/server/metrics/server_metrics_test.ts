// ServerMetrics: what one scrape takes from the runtime's stats (gauges, counter deltas, KV per
// tier), how a request observer counts a request once, by status, and vLLM's names beside Sluice's.

import type { RuntimeStats } from "../../../runtime/service.ts";
import { parsePrometheusText, sampleValue } from "../../../server/metrics/parse.ts";
import { type RuntimeView, ServerMetrics } from "../../../server/metrics/server_metrics.ts";
import { IDLE_STATS } from "../../helpers/idle_stats.ts";
import { assertEquals } from "../../helpers/testing.ts";

function fakeRuntime(stats: Partial<RuntimeStats>, stepMs: number[] = []): RuntimeView {
  return {
    stats: () => ({ ...IDLE_STATS, ...stats }),
    takeStepTimes: () => stepMs.splice(0),
  };
}

Deno.test("server metrics: a scrape sets the gauges and adds what the runtime's counters grew", () => {
  const metrics = new ServerMetrics();
  const scrape = (stats: Partial<RuntimeStats>, stepMs: number[] = []) => {
    metrics.observeRuntime(fakeRuntime(stats, stepMs));
    return parsePrometheusText(metrics.render());
  };
  let s = scrape({
    waiting: 3,
    paused: 2,
    running: 5,
    kvBlocksUsed: 40,
    kvBlocksTotal: 64,
    tokensGenerated: 100,
    preemptions: 4,
  }, [12, 30]);
  assertEquals(sampleValue(s, "sluice_queue_depth"), 3);
  assertEquals(sampleValue(s, "sluice_paused_requests"), 2);
  assertEquals(sampleValue(s, "sluice_running_requests"), 5);
  assertEquals(sampleValue(s, "sluice_kv_blocks_used", { tier: "device" }), 40);
  assertEquals(sampleValue(s, "sluice_kv_blocks_total", { tier: "device" }), 64);
  assertEquals(sampleValue(s, "sluice_kv_blocks_used", { tier: "host" }), 0);
  assertEquals(sampleValue(s, "sluice_kv_blocks_total", { tier: "host" }), 0);
  assertEquals(sampleValue(s, "sluice_tokens_generated_total"), 100);
  assertEquals(sampleValue(s, "sluice_preemptions_total"), 4);
  assertEquals(sampleValue(s, "sluice_step_seconds_count"), 2);

  s = scrape({ paused: 0, tokensGenerated: 130, preemptions: 7 });
  assertEquals(sampleValue(s, "sluice_paused_requests"), 0);
  assertEquals(sampleValue(s, "sluice_tokens_generated_total"), 130);
  assertEquals(sampleValue(s, "sluice_preemptions_total"), 7);
  assertEquals(sampleValue(s, "sluice_step_seconds_count"), 2);
});

Deno.test("server metrics: paused requests, recomputed tokens and effective tokens", () => {
  const metrics = new ServerMetrics();
  const scrape = (stats: Partial<RuntimeStats>) => {
    metrics.observeRuntime(fakeRuntime(stats));
    return parsePrometheusText(metrics.render());
  };
  let s = scrape({ paused: 3, recomputedTokens: 40, effectiveTokens: 12.5 });
  assertEquals(sampleValue(s, "sluice_paused_requests"), 3);
  assertEquals(sampleValue(s, "sluice_recomputed_tokens_total"), 40);
  assertEquals(sampleValue(s, "sluice_effective_tokens_total"), 12.5);
  s = scrape({ paused: 1, recomputedTokens: 55, effectiveTokens: 20 });
  assertEquals(sampleValue(s, "sluice_paused_requests"), 1);
  assertEquals(sampleValue(s, "sluice_recomputed_tokens_total"), 55);
  assertEquals(sampleValue(s, "sluice_effective_tokens_total"), 20);
});

Deno.test("server metrics: layer-wise admissions count what grew, and none without layer-wise prefill", () => {
  const metrics = new ServerMetrics();
  const scrape = (stats: Partial<RuntimeStats>) => {
    metrics.observeRuntime(fakeRuntime(stats));
    return parsePrometheusText(metrics.render());
  };
  assertEquals(sampleValue(scrape({}), "sluice_layerwise_admissions_total"), 0);
  assertEquals(
    sampleValue(scrape({ layerwiseAdmissions: 4 }), "sluice_layerwise_admissions_total"),
    4,
  );
  assertEquals(
    sampleValue(scrape({ layerwiseAdmissions: 9 }), "sluice_layerwise_admissions_total"),
    9,
  );
});

Deno.test("server metrics: preemptions by what became of the victim's KV", () => {
  const metrics = new ServerMetrics();
  const scrape = (preemptChoices: RuntimeStats["preemptChoices"]) => {
    metrics.observeRuntime(fakeRuntime({ preemptChoices }));
    return parsePrometheusText(metrics.render());
  };
  let s = scrape({ swap: 2, dropOldest: 5, dropAll: 1 });
  const kind = (k: string) => sampleValue(s, "sluice_preemption_choices_total", { kind: k });
  assertEquals([kind("swap"), kind("drop_oldest"), kind("drop_all")], [2, 5, 1]);
  s = scrape({ swap: 3, dropOldest: 5, dropAll: 4 });
  assertEquals([kind("swap"), kind("drop_oldest"), kind("drop_all")], [3, 5, 4]);
});

Deno.test("server metrics: speculative decoding's counters under vLLM's spec_decode names", () => {
  const metrics = new ServerMetrics("m");
  const scrape = (speculation?: RuntimeStats["speculation"]) => {
    metrics.observeRuntime(fakeRuntime({ speculation }));
    return parsePrometheusText(metrics.render());
  };
  const label = { model_name: "m" };
  let s = scrape();
  assertEquals(sampleValue(s, "vllm:spec_decode_num_drafts_total", label), 0);
  s = scrape({ drafts: 3, draftTokens: 12, acceptedTokens: 7, acceptedPerPos: [3, 2, 1, 1] });
  const at = (position: number) =>
    sampleValue(s, "vllm:spec_decode_num_accepted_tokens_per_pos_total", {
      ...label,
      position: String(position),
    });
  assertEquals(sampleValue(s, "vllm:spec_decode_num_drafts_total", label), 3);
  assertEquals(sampleValue(s, "vllm:spec_decode_num_draft_tokens_total", label), 12);
  assertEquals(sampleValue(s, "vllm:spec_decode_num_accepted_tokens_total", label), 7);
  assertEquals([at(0), at(1), at(2), at(3)], [3, 2, 1, 1]);
  s = scrape({ drafts: 5, draftTokens: 20, acceptedTokens: 9, acceptedPerPos: [5, 2, 1, 1] });
  assertEquals(sampleValue(s, "vllm:spec_decode_num_accepted_tokens_total", label), 9);
  assertEquals([at(0), at(1)], [5, 2]);
});

Deno.test("server metrics: the host tier, swaps, bytes moved and prefix-cache hits", () => {
  const metrics = new ServerMetrics();
  const scrape = (stats: Partial<RuntimeStats>) => {
    metrics.observeRuntime(fakeRuntime(stats));
    return parsePrometheusText(metrics.render());
  };
  const swaps = {
    swapsOut: 3,
    swapsIn: 2,
    blocksOut: 0,
    blocksIn: 0,
    blocksWrittenThrough: 0,
    repeatSwapsOut: 0,
    repeatBlocksOut: 0,
  };
  const prefix = {
    entries: 4,
    hitBlocks: 10,
    hostHitBlocks: 3,
    lookupBlocks: 16,
    evictions: 0,
    demotions: 2,
    deviceBlocks: 8,
    hostBlocks: 4,
  };
  let s = scrape({
    hostBlocksUsed: 7,
    hostBlocksTotal: 90,
    kvBlocksCached: 5,
    swaps,
    kvBytesMoved: { out: 4096, in: 2048 },
    prefix,
  });
  assertEquals(sampleValue(s, "sluice_kv_blocks_used", { tier: "host" }), 7);
  assertEquals(sampleValue(s, "sluice_kv_blocks_total", { tier: "host" }), 90);
  assertEquals(sampleValue(s, "sluice_kv_blocks_cached"), 5);
  assertEquals(sampleValue(s, "sluice_swaps_total", { direction: "out" }), 3);
  assertEquals(sampleValue(s, "sluice_swaps_total", { direction: "in" }), 2);
  assertEquals(sampleValue(s, "sluice_kv_bytes_moved_total", { direction: "out" }), 4096);
  assertEquals(sampleValue(s, "sluice_kv_bytes_moved_total", { direction: "in" }), 2048);
  assertEquals(sampleValue(s, "sluice_prefix_cache_hit_blocks_total"), 10);
  assertEquals(sampleValue(s, "sluice_prefix_cache_hit_blocks_total", { tier: "host" }), 3);
  assertEquals(sampleValue(s, "sluice_prefix_cache_lookup_blocks_total"), 16);
  s = scrape({
    swaps: { ...swaps, swapsIn: 5 },
    kvBytesMoved: { out: 4096, in: 8192 },
    prefix: { ...prefix, hitBlocks: 12, lookupBlocks: 20 },
  });
  assertEquals(sampleValue(s, "sluice_swaps_total", { direction: "in" }), 5);
  assertEquals(sampleValue(s, "sluice_kv_bytes_moved_total", { direction: "in" }), 8192);
  assertEquals(sampleValue(s, "sluice_prefix_cache_hit_blocks_total"), 12);
  assertEquals(sampleValue(s, "sluice_prefix_cache_hit_blocks_total", { tier: "device" }), 9);
  assertEquals(sampleValue(s, "sluice_kv_blocks_used", { tier: "host" }), 0);
});

Deno.test("server metrics: the offload planner's solves and their durations", () => {
  const metrics = new ServerMetrics();
  const planner = {
    requested: { "no-plan": 1, batch: 2, window: 0, drift: 0 },
    solves: 3,
    lastSolveMs: 4,
    solveMsTotal: 7,
    abandoned: 0,
    failed: 0,
    pauses: 0,
  };
  const solveMs = [2, 1, 4];
  const view = (solves: number): RuntimeView => ({
    stats: () => ({ ...IDLE_STATS, planner: { ...planner, solves } }),
    takeStepTimes: () => [],
    takeSolveTimes: () => solveMs.splice(0),
  });
  metrics.observeRuntime(view(3));
  let s = parsePrometheusText(metrics.render());
  assertEquals(sampleValue(s, "sluice_planner_solves_total"), 3);
  assertEquals(sampleValue(s, "sluice_planner_solve_seconds_count"), 3);
  assertEquals(sampleValue(s, "sluice_planner_solve_seconds_bucket", { le: "0.001" }), 1);
  assertEquals(sampleValue(s, "sluice_planner_solve_seconds_bucket", { le: "0.005" }), 3);
  metrics.observeRuntime(view(5));
  s = parsePrometheusText(metrics.render());
  assertEquals(sampleValue(s, "sluice_planner_solves_total"), 5);
  assertEquals(sampleValue(s, "sluice_planner_solve_seconds_count"), 3);
  // A runtime with no planner adds nothing.
  metrics.observeRuntime(fakeRuntime({}));
  assertEquals(
    sampleValue(parsePrometheusText(metrics.render()), "sluice_planner_solves_total"),
    5,
  );
});

Deno.test("server metrics: an observer counts its request once and closes it", () => {
  const metrics = new ServerMetrics();
  const a = metrics.requestStarted();
  const b = metrics.requestStarted();
  assertEquals(metrics.openRequests, 2);
  a.token();
  a.token();
  a.stalled(0.25);
  a.finish(200);
  a.finish(500);
  b.finish(499);
  assertEquals(metrics.openRequests, 0);
  assertEquals(a.tokens, 2);
  const s = parsePrometheusText(metrics.render());
  assertEquals(sampleValue(s, "sluice_requests_total", { status: "200" }), 1);
  assertEquals(sampleValue(s, "sluice_requests_total", { status: "499" }), 1);
  assertEquals(sampleValue(s, "sluice_requests_total", { status: "500" }), undefined);
  assertEquals(sampleValue(s, "sluice_ttft_seconds_count"), 1);
  assertEquals(sampleValue(s, "sluice_inter_token_seconds_count"), 1);
  assertEquals(sampleValue(s, "sluice_stall_seconds_total"), 0.25);
});

Deno.test("server metrics: vLLM's names, labelled with the model, read the same events", () => {
  const metrics = new ServerMetrics("tiny");
  const model = { model_name: "tiny" };
  const scrape = (stats: Partial<RuntimeStats>) => {
    metrics.observeRuntime(fakeRuntime(stats));
    return parsePrometheusText(metrics.render());
  };
  let s = scrape({ waiting: 3, paused: 2, running: 5, kvBlocksUsed: 16, kvBlocksTotal: 64 });
  assertEquals(sampleValue(s, "vllm:num_requests_running", model), 5);
  // vLLM puts preempted requests back in its waiting queue: Sluice's paused ones count there.
  assertEquals(sampleValue(s, "vllm:num_requests_waiting", model), 5);
  assertEquals(sampleValue(s, "vllm:kv_cache_usage_perc", model), 0.25);
  s = scrape({ preemptions: 4, kvBlocksTotal: 0 });
  assertEquals(sampleValue(s, "vllm:num_preemptions_total", model), 4);
  assertEquals(sampleValue(s, "vllm:kv_cache_usage_perc", model), 0, "no pool yet: 0, not NaN");
  s = scrape({ preemptions: 9 });
  assertEquals(sampleValue(s, "vllm:num_preemptions_total", model), 9);

  // Latencies: TTFT and token gaps from every request that sends tokens; end-to-end only from
  // generation requests that complete.
  const done = metrics.requestStarted();
  done.generating();
  done.token();
  done.token();
  done.token();
  done.finish(200);
  const cut = metrics.requestStarted();
  cut.generating();
  cut.token();
  cut.finish(499);
  metrics.requestStarted().finish(200); // GET /v1/models
  s = parsePrometheusText(metrics.render());
  assertEquals(sampleValue(s, "vllm:time_to_first_token_seconds_count", model), 2);
  assertEquals(sampleValue(s, "vllm:inter_token_latency_seconds_count", model), 2);
  assertEquals(sampleValue(s, "vllm:e2e_request_latency_seconds_count", model), 1);
  assertEquals(
    sampleValue(s, "vllm:time_to_first_token_seconds_sum", model),
    sampleValue(s, "sluice_ttft_seconds_sum"),
  );
});
