// The panel's JSON: runtime stats mapped field by field, TTFT and token rates taken from
// ServerMetrics over a window of recent samples, and what it says before the model is ready.

import type { Tokenizer } from "../../../engine/text/tokenizer.ts";
import { chatModel, type ModelRouter } from "../../../runtime/model_router.ts";
import type { PromptEncoder, Runtime } from "../../../runtime/service.ts";
import { ServerMetrics } from "../../../server/metrics/server_metrics.ts";
import { PanelStateBuilder } from "../../../server/playground/panel_state.ts";
import type { ServerState } from "../../../server/state/server_state.ts";
import { IDLE_STATS } from "../../helpers/idle_stats.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

const IDLE = IDLE_STATS;

/** The router's view of one loaded model "tiny" over `runtime` (what the panel reads). */
function oneModel(runtime: Runtime): ModelRouter {
  const model = {
    ...chatModel({
      runtime: { ...runtime, info: { weightBytes: 0, kvBytes: 0, hostBlocks: 0, kvBlockBytes: 0 } },
      tokenizer: {} as Tokenizer,
      prompts: {} as PromptEncoder,
    } as never),
  };
  const listing = {
    id: "tiny",
    aliases: [],
    source: "",
    sizeBytes: 0,
    status: "ready" as const,
    pinned: false,
    kind: "chat" as const,
    deviceBytes: 0,
    hostBytes: 0,
    expiresAtMs: null,
    lastError: null,
  };
  return {
    defaultId: "tiny",
    loaded: () => [{ id: "tiny", model }],
    list: () => [listing],
  } as unknown as ModelRouter;
}

/** A ready server whose runtime reports `stats.current`, and a clock the test moves. */
function fixture(windowMs = 5000) {
  const stats = { current: IDLE };
  const runtime = { stats: () => stats.current } as Runtime;
  const state: ServerState = {
    model: { status: "ready" },
    models: oneModel(runtime),
    draining: false,
  };
  const metrics = new ServerMetrics();
  const clock = { ms: 0 };
  const panel = new PanelStateBuilder(metrics, windowMs, () => clock.ms);
  return { stats, state, metrics, clock, panel };
}

Deno.test("panel state: runtime stats become requests, streams and KV tiers", () => {
  const { stats, state, panel } = fixture();
  stats.current = {
    ...IDLE,
    running: 2,
    waiting: 1,
    paused: 1,
    kvBlocksUsed: 12,
    kvBlocksCached: 3,
    kvBlocksTotal: 64,
    hostBlocksUsed: 5,
    hostBlocksTotal: 128,
    steps: 40,
    tokensGenerated: 77,
    preemptions: 2,
    requests: [
      {
        id: 1,
        state: "decoding",
        generated: 30,
        preemptions: 0,
        priority: 0,
        buffered: { tokens: 6, seconds: 0.3 },
      },
      {
        id: 4,
        state: "paused",
        generated: 9,
        preemptions: 2,
        priority: 0,
        buffered: { tokens: 20, seconds: 1 },
      },
    ],
  };
  const s = panel.snapshot(state);
  assertEquals(s.status, "ready");
  assertEquals(s.model, "tiny");
  assertEquals(s.requests, { running: 2, waiting: 1, paused: 1 });
  assertEquals(s.streams, [
    { id: 1, state: "decoding", generated: 30, buffered_tokens: 6, buffered_seconds: 0.3 },
    { id: 4, state: "paused", generated: 9, buffered_tokens: 20, buffered_seconds: 1 },
  ]);
  assertEquals(s.kv_blocks, {
    device: { used: 12, cached: 3, total: 64 },
    host: { used: 5, total: 128 },
  });
  assertEquals(s.totals, { tokens_generated: 77, tokens_sent: 0, steps: 40, preemptions: 2 });
});

Deno.test("panel state: rates and recent TTFT span the window; the mean spans all time", () => {
  const { stats, state, metrics, clock, panel } = fixture(5000);
  // Before any request: no rate on the first sample, no TTFT.
  let s = panel.snapshot(state);
  assertEquals(s.tokens_per_second, { generated: null, sent: null });
  assertEquals(s.ttft_seconds, { recent: null, mean: null, count: 0 });
  assertEquals(s.window_seconds, 0);

  // One request: first token after 0.5 s, then 9 more sent; the engine generated 12.
  metrics.m.ttft.observe(0.5);
  for (let i = 0; i < 9; i++) metrics.m.interToken.observe(0.1);
  stats.current = { ...IDLE, tokensGenerated: 12 };
  clock.ms = 2000;
  s = panel.snapshot(state);
  assertEquals(s.window_seconds, 2);
  assertEquals(s.tokens_per_second, { generated: 6, sent: 5 });
  assertEquals(s.ttft_seconds, { recent: 0.5, mean: 0.5, count: 1 });
  assertEquals(s.totals.tokens_sent, 10);

  // Polled each second: the base moves on to the newest sample at least 5 s old (t = 3 s)...
  for (clock.ms = 3000; clock.ms <= 7000; clock.ms += 1000) panel.snapshot(state);
  metrics.m.ttft.observe(1.5);
  stats.current = { ...IDLE, tokensGenerated: 42 };
  clock.ms = 8000;
  s = panel.snapshot(state);
  assertEquals(s.window_seconds, 5);
  assertEquals(s.tokens_per_second, { generated: 6, sent: 0.2 });
  // ...so the recent TTFT is the second request's alone, the mean both requests'.
  assertEquals(s.ttft_seconds, { recent: 1.5, mean: 1, count: 2 });

  // A quiet window: rates fall to zero and the recent TTFT to none.
  clock.ms = 20_000;
  panel.snapshot(state);
  clock.ms = 26_000;
  s = panel.snapshot(state);
  assertEquals(s.tokens_per_second, { generated: 0, sent: 0 });
  assertEquals(s.ttft_seconds.recent, null);
});

Deno.test("panel state: fast polling keeps few samples and still spans the window", () => {
  const { stats, state, clock, panel } = fixture(1000);
  let s = panel.snapshot(state);
  for (let t = 1; t <= 3000; t++) {
    clock.ms = t;
    stats.current = { ...IDLE, tokensGenerated: t * 2 }; // 2000 tokens/s
    s = panel.snapshot(state);
  }
  assertEquals(s.tokens_per_second.generated, 2000);
  assert(s.window_seconds >= 1 && s.window_seconds <= 1.05, `window ${s.window_seconds}`);
  // The builder keeps one sample per 1/20 window: about 21 samples, not 3000.
  assert((panel as unknown as { samples: unknown[] }).samples.length <= 22);
});

Deno.test("panel state: loading, failed and draining servers", () => {
  const state: ServerState = {
    model: { status: "loading" },
    models: oneModel({ stats: () => IDLE } as Runtime),
    draining: false,
  };
  const panel = new PanelStateBuilder(new ServerMetrics());
  let s = panel.snapshot(state);
  assertEquals([s.status, s.requests, s.kv_blocks, s.streams], ["loading", null, null, []]);
  state.model = { status: "failed", error: "/home/someone/model: not found" };
  s = panel.snapshot(state);
  assertEquals(s.status, "failed");
  assertEquals(JSON.stringify(s).includes("/home"), false, "the load error stays in /health");
  state.model = { status: "ready" };
  state.draining = true;
  assertEquals(panel.snapshot(state).status, "draining");
});
