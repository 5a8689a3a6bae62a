// Graceful shutdown (server/shutdown.ts) run directly, without signals: new work is refused while
// running streams play out; the grace period is enforced even for slow paced streams; a stream or
// response cut by it ends with an error, never with a normal finish.

import type { StepEngine } from "../../engine/engine.ts";
import { ServerMetrics } from "../../server/metrics/server_metrics.ts";
import { shutdown } from "../../server/shutdown.ts";
import type { ServerState } from "../../server/state/server_state.ts";
import { startingState } from "../helpers/model_router.ts";
import { assert, assertEquals, useFakeTime } from "../helpers/testing.ts";
import { MODEL_ID, SseReader, startServer, waitFor } from "./harness.ts";

/** A paced request whose playout takes far longer than any grace below (100 tokens at 2/s). */
const slow = {
  model: MODEL_ID,
  prompt: [3, 4, 5],
  max_tokens: 100,
  reading_rate: 2,
  ignore_eos: true,
  temperature: 0,
};

Deno.test("shutdown: the grace period cuts paced streams; they end with an error event", async () => {
  const s = await startServer();
  try {
    const streamed = await s.post("/v1/completions", { ...slow, stream: true });
    assertEquals(streamed.status, 200);
    const events = new SseReader(streamed);
    const first = JSON.parse((await events.next())!);
    assertEquals(first.choices[0].finish_reason, null);
    // Generated in well under a second: what remains is playout from its token buffer. (A reply
    // that is not streamed is unpaced: see the still-generating test below for its cut.)
    await waitFor(() => s.runtime.openRequests === 0 && s.metrics.openRequests === 1, "generation");

    const graceMs = 1500;
    const started = performance.now();
    const stopping = shutdown(s.state, s.metrics, s.server, graceMs);

    // While draining: health says so and new work is refused with 503.
    const health = await fetch(s.url + "/health");
    assertEquals([health.status, await health.json()], [503, { status: "draining" }]);
    const refused = await s.post("/v1/completions", { ...slow, max_tokens: 2 });
    assertEquals(refused.status, 503);
    assertEquals((await refused.json()).error.code, "shutting_down");

    const rest = await events.rest();
    await stopping;
    const took = performance.now() - started;
    assert(took >= graceMs - 50, `shutdown waited only ${took} ms`);
    // Cut, not played out: far fewer than the 100 tokens (50 s at 2/s) reached the reader.
    assert(rest.length < slow.max_tokens / 2, `${rest.length} events after the first`);

    // The stream: a few more tokens, then one error event, and no finish chunk or [DONE].
    const last = JSON.parse(rest.at(-1)!);
    assertEquals(last.error.code, "server_shutdown");
    assertEquals(last.error.type, "server_error");
    assert(!rest.includes("[DONE]"), "a cut stream has no [DONE]");
    for (const e of rest.slice(0, -1)) assertEquals(JSON.parse(e).choices[0].finish_reason, null);
    // The one cut and the one refused count as 503s (the server is gone: read the registry).
    assertEquals(s.metrics.openRequests, 0);
    assertEquals(s.metrics.m.requests.get({ status: "503" }), 2);
  } finally {
    await s.close();
  }
});

Deno.test("shutdown: streams that finish within the grace end normally, and it ends early", async () => {
  const s = await startServer();
  try {
    const res = await s.post("/v1/completions", {
      ...slow,
      max_tokens: 6,
      reading_rate: 10,
      stream: true,
    });
    const events = new SseReader(res);
    await events.next();
    // A grace of ten minutes: shutdown returns when the 0.6 s stream ends, or the test times out.
    const stopping = shutdown(s.state, s.metrics, s.server, 600_000);
    assertEquals(
      await Promise.race([stopping.then(() => "stopped"), delay(120_000).then(() => "waiting")]),
      "stopped",
    );
    const rest = await events.rest();
    assertEquals(rest.at(-1), "[DONE]");
    assertEquals(JSON.parse(rest.at(-2)!).choices[0].finish_reason, "length");
  } finally {
    await s.close();
  }
});

/** Slow generation, not slow reading: each step waits 20 ms, so 500 tokens take 10 s. */
const slowed = (engine: StepEngine): StepEngine => ({
  info: engine.info,
  step: (plan) => delay(20).then(() => engine.step(plan)),
  close: () => engine.close(),
});

Deno.test("shutdown: a stream still generating when the grace ends is cut the same way", async () => {
  const s = await startServer({
    wrapEngine: slowed,
  });
  try {
    const res = await s.post("/v1/completions", {
      model: MODEL_ID,
      prompt: [7, 8],
      max_tokens: 500,
      ignore_eos: true,
      stream: true,
    });
    const events = new SseReader(res);
    await events.next();
    assertEquals(s.runtime.openRequests, 1);
    await shutdown(s.state, s.metrics, s.server, 200);
    const rest = await events.rest();
    assertEquals(JSON.parse(rest.at(-1)!).error.code, "server_shutdown");
    assert(!rest.includes("[DONE]"));
    // Cut while generating: far fewer than its 500 tokens (10 s of 20 ms steps) were sent.
    assert(rest.length < 250, `${rest.length} events after the first`);
  } finally {
    await s.close();
  }
});

Deno.test("shutdown: a whole reply still generating when the grace ends gets a 503 envelope", async () => {
  // Not streamed, so not paced: it is cut only while it is still being generated (20 ms a step).
  const s = await startServer({
    wrapEngine: slowed,
  });
  try {
    const whole = s.post("/v1/chat/completions", {
      model: MODEL_ID,
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 500,
      ignore_eos: true,
    });
    await waitFor(() => s.runtime.stats().tokensGenerated > 0, "generation to start");
    await shutdown(s.state, s.metrics, s.server, 200);
    // A 503 envelope, not a truncated completion.
    const cut = await whole;
    assertEquals(cut.status, 503);
    assertEquals((await cut.json()).error.code, "server_shutdown");
    assertEquals(s.metrics.m.requests.get({ status: "503" }), 1);
  } finally {
    await s.close();
  }
});

Deno.test("shutdown: waits for open requests at most the grace, and for the server at most the linger", async () => {
  const state: ServerState = startingState();
  const metrics = new ServerMetrics();
  const open = metrics.requestStarted(); // never finishes: a client that stopped reading
  let stopped = false;
  const stuck = { shutdown: () => new Promise<void>(() => stopped = true) };
  const started = performance.now();
  await shutdown(state, metrics, stuck, 300, 200);
  const took = performance.now() - started;
  // It returned though the request is still open and the server never stopped: both waits are
  // bounded (had either waited for its event, this would never return).
  assert(stopped && state.draining);
  assertEquals(metrics.openRequests, 1);
  assert(took >= 480, `took ${took} ms for 300 ms of grace and 200 of linger`);
  open.finish(499);

  // Nothing open: no wait at all. Under a fake clock that never moves, any timer would hang it.
  const clock = useFakeTime(Date.now());
  try {
    await shutdown(state, metrics, { shutdown: () => Promise.resolve() }, 10_000);
  } finally {
    clock.uninstall();
  }
});

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));
