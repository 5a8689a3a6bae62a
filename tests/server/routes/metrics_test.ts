// GET /metrics over a running server: requests counted by final status (429 refusals, 499 for a
// client that went away from a streamed or a whole response), preemptions and paused requests
// from the runtime, and KV blocks per tier; vLLM's names for the same, labelled with the model.

import { sampleValue } from "../../../server/metrics/parse.ts";
import { connect, send } from "../connections/raw_http.ts";
import { assert, assertEquals, assertMatch } from "../../helpers/testing.ts";
import { MODEL_ID, SseReader, startServer, TINY_SPEC, waitFor } from "../harness.ts";

Deno.test("/metrics: a client that leaves a non-streamed request counts as 499", async () => {
  const s = await startServer();
  try {
    const ctrl = new AbortController();
    const pending = s.post("/v1/completions", {
      model: MODEL_ID,
      prompt: [5, 6],
      max_tokens: 200,
      reading_rate: 5, // 40 s of playout
      ignore_eos: true,
    }, { signal: ctrl.signal }).catch((e) => e);
    await waitFor(() => s.runtime.stats().tokensGenerated > 0, "generation to start");
    ctrl.abort();
    assert((await pending) instanceof Error, "the fetch was aborted");
    // Counted at once, not after the 40 s the buffer would have taken to play out.
    await waitFor(() => s.metrics.openRequests === 0, "the request to end", 5_000);
    const m = await s.scrape();
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "499" }), 1);
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "200" }), undefined);
    assertEquals(s.runtime.stats().requests, []);
  } finally {
    await s.close();
  }
});

Deno.test("/metrics: 50 streams dropped mid-stream count as 499 and free every KV block", async () => {
  const s = await startServer();
  try {
    const before = s.runtime.stats().kvBlocksUsed;
    await Promise.all(Array.from({ length: 50 }, async (_, i) => {
      const ctrl = new AbortController();
      const res = await s.post("/v1/completions", {
        model: MODEL_ID,
        prompt: [i % 40 + 1, 7, 9],
        max_tokens: 300,
        stream: true,
        ignore_eos: true,
        reading_rate: i % 2 ? 50 : undefined,
      }, { signal: ctrl.signal });
      const events = new SseReader(res);
      if (i % 5 !== 0) await events.next(); // most drop after the first chunk; some at once
      ctrl.abort();
      await events.cancel().catch(() => {});
    }));
    await waitFor(() => s.runtime.openRequests === 0, "every request to end", 30_000);
    await waitFor(() => s.metrics.openRequests === 0, "every stream to end");
    const m = await s.scrape();
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "499" }), 50);
    assertEquals(sampleValue(m, "sluice_running_requests"), 0);
    assertEquals(sampleValue(m, "sluice_kv_blocks_used", { tier: "device" }), before);
  } finally {
    await s.close();
  }
});

Deno.test("/metrics: a full queue answers 429 with Retry-After and counts it", async () => {
  const s = await startServer({ engine: { maxSlots: 1 }, runtime: { maxQueue: 0 } });
  try {
    // One running request fills the only slot; with no queue the next one is refused.
    const first = await s.post("/v1/completions", {
      model: MODEL_ID,
      prompt: "a",
      max_tokens: 200,
      stream: true,
      ignore_eos: true,
      reading_rate: 20,
    });
    const events = new SseReader(first);
    await events.next();
    const refused = await s.post("/v1/completions", {
      model: MODEL_ID,
      prompt: "b",
      max_tokens: 2,
    });
    assertEquals(refused.status, 429);
    assert(Number(refused.headers.get("retry-after")) > 0);
    const body = await refused.json();
    assertEquals(body.error.type, "rate_limit_error");
    assertEquals(body.error.code, "rate_limit_exceeded");
    await events.cancel();
    const m = await s.scrape();
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "429" }), 1);
    assertEquals(sampleValue(m, "sluice_running_requests"), 1);
  } finally {
    await s.close();
  }
});

/** A KV budget (MiB) that holds `blocks` blocks for TINY_SPEC on the f16 path, table included. */
function budgetForBlocks(blocks: number, maxSlots: number, blockSize = 16, maxPos = 2048): number {
  const headDim = TINY_SPEC.hiddenSize / TINY_SPEC.numHeads;
  const perBlock = 2 * blockSize * TINY_SPEC.numKvHeads * headDim * 2;
  const table = TINY_SPEC.numLayers * maxSlots * Math.ceil(maxPos / blockSize) * 4;
  return (table + blocks * perBlock) / 2 ** 20;
}

Deno.test("/metrics: preemptions, paused requests and KV blocks per tier, in both namings", async () => {
  const maxSlots = 8;
  const s = await startServer({
    engine: { maxSlots, maxRows: 32, gpuKvMb: budgetForBlocks(40, maxSlots) },
  });
  try {
    let m = await s.scrape();
    const total = sampleValue(m, "sluice_kv_blocks_total", { tier: "device" })!;
    assert(total > 0 && total <= 48, `device blocks ${total}`);
    assertEquals(sampleValue(m, "sluice_kv_blocks_total", { tier: "host" }), 0);
    assertEquals(sampleValue(m, "sluice_kv_blocks_used", { tier: "host" }), 0);
    assertEquals(sampleValue(m, "sluice_preemptions_total"), 0);
    assertEquals(sampleValue(m, "sluice_paused_requests"), 0);

    // 8 requests that need up to 8 × (prompt + 40) positions per layer, against 20 blocks (320
    // positions) per layer: fcfs must preempt. Scrape while they run to see the gauges move.
    let peakPaused = 0;
    let peakUsed = 0;
    let peakUsage = 0;
    let running = true;
    const model = { model_name: MODEL_ID };
    const scraping = (async () => {
      while (running) {
        const now = await s.scrape();
        peakPaused = Math.max(peakPaused, sampleValue(now, "sluice_paused_requests")!);
        const used = sampleValue(now, "sluice_kv_blocks_used", { tier: "device" })!;
        peakUsed = Math.max(peakUsed, used);
        // vLLM's usage is the same scrape's device blocks in use, as a fraction.
        const usage = sampleValue(now, "vllm:kv_cache_usage_perc", model)!;
        assertEquals(usage, used / total);
        peakUsage = Math.max(peakUsage, usage);
        assertEquals(
          sampleValue(now, "vllm:num_requests_waiting", model),
          sampleValue(now, "sluice_queue_depth")! + sampleValue(now, "sluice_paused_requests")!,
        );
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    await Promise.all([30, 12, 45, 7, 26, 60, 3, 18].map((len, i) =>
      s.client.completions.create({
        model: MODEL_ID,
        prompt: Array.from({ length: len }, (_, k) => (k * 7 + i) % 200 + 3),
        max_tokens: 40,
        temperature: 0,
        ignore_eos: true,
      } as never)
    ));
    running = false;
    await scraping;
    m = await s.scrape();
    const preemptions = sampleValue(m, "sluice_preemptions_total")!;
    assertEquals(preemptions, s.runtime.stats().preemptions);
    assert(preemptions >= 2, `only ${preemptions} preemptions (peak paused ${peakPaused})`);
    // Preempted requests paid their computed positions again; unpaced readers kept up, so
    // (nearly) every token counts as effective, and never more than were generated.
    const recomputed = sampleValue(m, "sluice_recomputed_tokens_total")!;
    assertEquals(recomputed, s.runtime.stats().recomputedTokens);
    assert(recomputed > 0, "preemptions recompute tokens");
    const effective = sampleValue(m, "sluice_effective_tokens_total")!;
    assertEquals(effective, s.runtime.stats().effectiveTokens);
    assert(effective > 0.9 * 8 * 40 && effective <= 8 * 40, `effective tokens ${effective}`);
    assert(peakUsed > 0, "KV blocks in use while requests ran");
    assert(peakUsage > 0 && peakUsage <= 1, `vllm:kv_cache_usage_perc peaked at ${peakUsage}`);
    assertEquals(sampleValue(m, "vllm:num_preemptions_total", model), preemptions);
    assertEquals(sampleValue(m, "vllm:num_requests_running", model), 0);
    assertEquals(sampleValue(m, "vllm:time_to_first_token_seconds_count", model), 8);
    assertEquals(sampleValue(m, "vllm:e2e_request_latency_seconds_count", model), 8);
    assertEquals(sampleValue(m, "vllm:inter_token_latency_seconds_count", model), 8 * 39);
    assertEquals(sampleValue(m, "sluice_paused_requests"), 0);
    assertEquals(sampleValue(m, "sluice_kv_blocks_used", { tier: "device" }), 0);
  } finally {
    await s.close();
  }
});

Deno.test("metrics: a client that goes away halfway through its body counts as 499, not 400", async () => {
  const s = await startServer();
  try {
    const conn = await connect(Number(new URL(s.url).port));
    await send(
      conn,
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
        'Content-Length: 1000\r\n\r\n{"model":"',
    );
    await waitFor(() => s.metrics.openRequests === 1, "the request to arrive");
    conn.close();
    await waitFor(() => s.metrics.openRequests === 0, "the request to end");
    const m = await s.scrape();
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "499" }), 1);
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "400" }), undefined);
  } finally {
    await s.close();
  }
});

Deno.test("metrics: --metrics-auth puts /metrics behind the API key; it is open by default", async () => {
  for (const metricsAuth of [false, true]) {
    const s = await startServer({ config: { apiKey: "sesame", metricsAuth } });
    try {
      const open = await fetch(`${s.url}/metrics`);
      await open.body?.cancel();
      assertEquals(open.status, metricsAuth ? 401 : 200);
      const keyed = await fetch(`${s.url}/metrics`, {
        headers: { authorization: "Bearer sesame" },
      });
      assertEquals(keyed.status, 200);
      assertMatch(await keyed.text(), /sluice_requests_total/);
    } finally {
      await s.close();
    }
  }
});
