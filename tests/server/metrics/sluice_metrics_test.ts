// The Sluice metric set: the contracted names, types and labels the benchmark scrapes.

import { Registry } from "../../../server/metrics/exposition.ts";
import { parsePrometheusText, sampleValue } from "../../../server/metrics/parse.ts";
import {
  createSluiceMetrics,
  SLUICE_METRIC_NAMES,
} from "../../../server/metrics/sluice_metrics.ts";
import { assertEquals } from "../../helpers/testing.ts";

Deno.test("metrics: the Sluice metric set has the contracted names, types and labels", () => {
  const registry = new Registry();
  const m = createSluiceMetrics(registry);
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
      ["sluice_planner_solves_total", "counter"],
      ["sluice_planner_solve_seconds", "histogram"],
      ["sluice_stall_seconds_total", "counter"],
    ]),
  );
  assertEquals(new Set(Object.values(SLUICE_METRIC_NAMES)), new Set(types.keys()));
  // Every HELP line is present and non-empty.
  assertEquals([...text.matchAll(/^# HELP \S+ \S.*$/gm)].length, 19);

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
});
