// GET /state over a running server: while a paced stream plays, the panel's JSON shows it running
// with playout buffered, its KV blocks held, and its first token timed; it lists every request, so
// it needs the API key when the server has one; it is not counted as API traffic.

import { sampleValue } from "../../../server/metrics/parse.ts";
import type { PanelState } from "../../../server/playground/panel_state.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { MODEL_ID, SseReader, startServer, waitFor } from "../harness.ts";

Deno.test("/state: a paced stream shows as running, with buffered playout, KV and TTFT", async () => {
  const s = await startServer({ config: { apiKey: "sesame" } });
  try {
    const locked = await fetch(`${s.url}/state`);
    assertEquals(locked.status, 401);
    assertEquals((await locked.json()).error.code, "invalid_api_key");
    const state = async (): Promise<PanelState> => {
      const res = await fetch(`${s.url}/state`, { headers: { authorization: "Bearer sesame" } });
      assertEquals(res.status, 200);
      assertEquals(res.headers.get("cache-control"), "no-store");
      return await res.json();
    };
    const idle = await state();
    assertEquals(idle.status, "ready");
    assertEquals(idle.model, MODEL_ID);
    assertEquals(idle.requests, { running: 0, waiting: 0, paused: 0 });
    assert(idle.kv_blocks!.device.total > 0);

    const res = await s.post("/v1/chat/completions", {
      model: MODEL_ID,
      messages: [{ role: "user", content: "hello" }],
      max_tokens: 200,
      ignore_eos: true,
      stream: true,
      reading_rate: 20, // generated much faster than it plays: the buffer fills
    });
    assertEquals(res.status, 200);
    const events = new SseReader(res);
    await events.next();
    let seen: PanelState | undefined;
    await waitFor(async () => {
      seen = await state();
      return (seen.streams[0]?.buffered_seconds ?? 0) > 0 && seen.ttft_seconds.count === 1;
    }, "the stream to bank playout and send its first token");
    assertEquals(seen!.requests!.running, 1);
    assertEquals(seen!.streams[0].buffered_seconds, seen!.streams[0].buffered_tokens / 20);
    assert(seen!.kv_blocks!.device.used > 0, "the stream holds KV blocks");
    assert(seen!.ttft_seconds.mean! > 0);
    await events.cancel();
    await waitFor(() => s.metrics.openRequests === 0, "the stream to end");

    // The stream counted once (499: left early); the panel's polls did not count at all.
    const m = await s.scrape();
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "499" }), 1);
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "200" }), undefined);
  } finally {
    await s.close();
  }
});
