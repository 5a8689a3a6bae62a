// The serving benchmark's client side against fake servers on 127.0.0.1: the SSE parser, the
// loopback-only HTTP client, the reader-model client on a scripted timeline (exact arrival, display
// and buffer values), every request outcome, the replayer, the server launcher, and one whole
// `bench serve` run against a fake server program. Fake servers run on a port chosen by the OS.

import { benchServe } from "../../bench/serve.ts";
import { generatedInChunk, runClient, tokensInChunk } from "../../bench/serve/client.ts";
import { getText, loopbackRequest, readText } from "../../bench/serve/http.ts";
import {
  type LoopbackTarget,
  loopbackTarget,
  NotLoopbackError,
  targetFromUrl,
} from "../../bench/serve/loopback.ts";
import { requestMetrics } from "../../bench/serve/metrics.ts";
import { bufferAtArrivals } from "../../bench/serve/playout.ts";
import { modelInfo, replay } from "../../bench/serve/run.ts";
import { assertSafeFlags, startServer } from "../../bench/serve/server_process.ts";
import { SseParser } from "../../bench/serve/sse.ts";
import { parseTrace, type WorkloadRequest } from "../../bench/serve/workload.ts";
import { assert, assertEquals, assertRejects, assertThrows } from "../helpers/testing.ts";
import { rng, testSeed } from "../helpers/random.ts";

const enc = new TextEncoder();

/** Runs `fn` against a Deno.serve on 127.0.0.1 with an OS-chosen port, then shuts it down. */
async function withServer(handler: Deno.ServeHandler, fn: (t: LoopbackTarget) => Promise<void>) {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, handler);
  try {
    await fn(loopbackTarget("127.0.0.1", (server.addr as Deno.NetAddr).port));
  } finally {
    await server.shutdown();
  }
}

/** A raw TCP server answering every connection with fixed bytes, for exact HTTP framing tests. */
async function withRawServer(reply: Uint8Array, fn: (t: LoopbackTarget) => Promise<void>) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const serving = (async () => {
    for await (const conn of listener) {
      const buf = new Uint8Array(4096);
      await conn.read(buf); // the request; its content does not matter here
      for (let off = 0; off < reply.length;) off += await conn.write(reply.subarray(off));
      conn.close();
    }
  })().catch(() => {});
  try {
    await fn(loopbackTarget("127.0.0.1", (listener.addr as Deno.NetAddr).port));
  } finally {
    listener.close();
    await serving;
  }
}

const chunk = (text: string, finish: string | null = null) => ({
  object: "text_completion",
  choices: [{ index: 0, text, finish_reason: finish }],
});
const sse = (o: unknown) => `data: ${typeof o === "string" ? o : JSON.stringify(o)}\n\n`;

const REQ: WorkloadRequest = {
  id: 7,
  arrivalS: 0,
  promptIds: [5, 6, 7],
  outputLen: 15,
  readingRate: 10,
  sloTtftMs: 1200,
  sloTbtMs: 300,
};
const PROMPT = { prompt: [5, 6, 7], maxTokens: 15 };

Deno.test("sse: events split anywhere across reads, CRLF, comments, multi-line data, UTF-8", () => {
  const seed = testSeed();
  const text =
    ': keep-alive\r\ndata: {"a":1}\r\n\r\ndata: line1\ndata: line2\n\nevent: x\ndata: héllo ✓\n\n' +
    "data:nospace\r\r" + "data: [DONE]\n\n";
  const want = ['{"a":1}', "line1\nline2", "héllo ✓", "nospace", "[DONE]"];
  const bytes = enc.encode(text);
  const next = rng(seed);
  for (let trial = 0; trial < 50; trial++) {
    const p = new SseParser();
    const got: string[] = [];
    for (let off = 0; off < bytes.length;) {
      const n = 1 + Math.floor(next() * 7);
      got.push(...p.push(bytes.subarray(off, off + n)));
      off += n;
    }
    got.push(...p.end());
    assertEquals(got, want, `seed ${seed}, trial ${trial}`);
  }
  const unterminated = new SseParser();
  assertEquals(unterminated.push(enc.encode("data: last")), []);
  assertEquals(
    unterminated.end(),
    ["last"],
    "a final event without a blank line is flushed at the end",
  );
});

Deno.test("client: tokens per chunk", () => {
  assertEquals(tokensInChunk(chunk("a")), 1);
  assertEquals(
    tokensInChunk(chunk("")),
    1,
    "an empty text is a token (partial UTF-8) while not finished",
  );
  assertEquals(tokensInChunk(chunk("", "length")), 0, "bare finish chunk");
  assertEquals(tokensInChunk(chunk("z", "stop")), 1);
  assertEquals(tokensInChunk({ choices: [], usage: { completion_tokens: 3 } }), 0);
  assertEquals(
    tokensInChunk({ choices: [{ text: "ab", token_ids: [1, 2], finish_reason: null }] }),
    2,
  );
  const lp = { tokens: ["a", "b", "c"], token_logprobs: [-1, -2, -3], text_offset: [0, 1, 2] };
  assertEquals(tokensInChunk({ choices: [{ text: "abc", logprobs: lp, finish_reason: null }] }), 3);
  assertEquals(tokensInChunk({ choices: [{ delta: { content: "x" }, finish_reason: null }] }), 1);
});

Deno.test("loopback: any host but 127.0.0.1 is refused before a socket opens", async () => {
  for (const host of ["10.0.0.1", "localhost", "0.0.0.0", "::1", "example.com", "127.0.0.2"]) {
    assertThrows(() => loopbackTarget(host, 8080), NotLoopbackError, host);
  }
  assertThrows(() => loopbackTarget("127.0.0.1", 0), NotLoopbackError);
  assertThrows(() => loopbackTarget("127.0.0.1", 70000), NotLoopbackError);
  for (
    const url of [
      "http://example.com:80",
      "https://127.0.0.1:8443",
      "http://user:pw@127.0.0.1:1",
      "http://127.0.0.1:80/x",
      "nonsense",
    ]
  ) {
    assertThrows(() => targetFromUrl(url), NotLoopbackError, url);
  }
  assertEquals(targetFromUrl("http://127.0.0.1:8123"), { host: "127.0.0.1", port: 8123 });
  // A forged target object is re-checked at connect time, by every entry point.
  const forged = { host: "192.0.2.1", port: 80 } as unknown as LoopbackTarget;
  await assertRejects(
    () => loopbackRequest(forged, { method: "GET", path: "/health" }),
    NotLoopbackError,
  );
  await assertRejects(() => getText(forged, "/metrics", 1000), NotLoopbackError);
  const r = await runClient(forged, REQ, PROMPT, { model: "m", timeoutMs: 1000, runStartMs: 0 });
  assertEquals(r.outcome, "failed");
  assert(/refusing to send traffic to 192\.0\.2\.1/.test(r.error ?? ""), r.error ?? "");
  assertEquals(r.arrivalsMs, []);
  assertEquals(
    (await modelInfo(forged, "fallback")).vocabSize,
    256,
    "model discovery falls back, never connects",
  );
});

Deno.test("http: chunked (with extensions and trailers), Content-Length and read-to-EOF bodies", async () => {
  const chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Test: yes\r\n\r\n" +
    "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nTrailer: t\r\n\r\n";
  await withRawServer(enc.encode(chunked), async (t) => {
    const res = await loopbackRequest(t, { method: "GET", path: "/" });
    assertEquals([res.status, res.headers.get("x-test")], [200, "yes"]);
    assertEquals(await readText(res), "hello, world");
  });
  await withRawServer(
    enc.encode("HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope-extra"),
    async (t) => {
      const res = await loopbackRequest(t, { method: "GET", path: "/" });
      assertEquals([res.status, await readText(res)], [404, "nope"]);
    },
  );
  await withRawServer(enc.encode("HTTP/1.0 200 OK\r\n\r\nuntil close"), async (t) => {
    assertEquals(await getText(t, "/", 2000), { status: 200, text: "until close" });
  });
  await withRawServer(
    enc.encode("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"),
    async (t) => {
      await assertRejects(() => getText(t, "/", 2000), /truncated chunk/);
    },
  );
  await withRawServer(enc.encode("garbage\r\n\r\n"), async (t) => {
    await assertRejects(() => getText(t, "/", 2000), /bad status line/);
  });
  await withServer(
    (req) => new Response(`${req.method} ${new URL(req.url).pathname} ${req.headers.get("host")}`),
    async (t) => {
      assertEquals((await getText(t, "/health", 2000)).text, `GET /health 127.0.0.1:${t.port}`);
    },
  );
});

/**
 * A server that plays a script on a virtual clock: before sending group k it sets the clock to the
 * group's time, and it waits until the client has recorded every token so far before moving on.
 * The client reads the same clock, so arrival times are exact.
 */
function scripted(
  groups: { at: number; tokens: number; end?: boolean }[],
  clock: { t: number },
  seen: { n: number },
  /** Token i's generation time, sent as Sluice's `sluice_timing` (none when omitted). */
  generatedMs?: (i: number) => number,
) {
  let captured: any;
  const handler = async (req: Request) => {
    captured = await req.json();
    let i = 0;
    const stream = new ReadableStream<Uint8Array>({
      async start(c) {
        let want = 0;
        for (const g of groups) {
          clock.t = g.at;
          let text = "";
          for (let k = 0; k < g.tokens; k++) {
            const timing = generatedMs && { generated_ms: generatedMs(i) };
            text += sse({ ...chunk(`t${i++}`), ...(timing ? { sluice_timing: timing } : {}) });
          }
          if (g.end) {
            text += sse(chunk("", "length")) +
              sse({ choices: [], usage: { prompt_tokens: 3, completion_tokens: i } }) +
              sse("[DONE]");
          }
          c.enqueue(enc.encode(text));
          want += g.tokens;
          if (g.end) break;
          for (let spin = 0; seen.n < want; spin++) {
            if (spin > 2000) throw new Error("client never recorded the tokens");
            await new Promise((r) => setTimeout(r, 5));
          }
        }
        c.close();
      },
    });
    return new Response(stream, { headers: { "content-type": "text/event-stream" } });
  };
  return { handler, body: () => captured };
}

Deno.test("client: arrival, display and buffer occupancy on a scripted timeline", async () => {
  const clock = { t: 0 };
  const seen = { n: 0 };
  // Ten tokens at once at 1 s, five more at 1.5 s; the reader reads 10 tokens/s.
  const s = scripted([{ at: 1000, tokens: 10 }, { at: 1500, tokens: 5, end: true }], clock, seen);
  await withServer(s.handler, async (t) => {
    const r = await runClient(t, REQ, PROMPT, {
      model: "tiny",
      timeoutMs: 20_000,
      runStartMs: -250,
      now: () => clock.t,
      onToken: () => seen.n++,
    });
    assertEquals(s.body(), {
      model: "tiny",
      prompt: [5, 6, 7],
      max_tokens: 15,
      stream: true,
      temperature: 0,
      ignore_eos: true,
      stream_options: { include_usage: true, include_timing: true },
      reading_rate: 10,
      slo_ttft_ms: 1200,
      slo_tbt_ms: 300,
    });
    assertEquals(
      [r.outcome, r.httpStatus, r.finishReason, r.usageCompletionTokens, r.promptTokens],
      ["ok", 200, "length", 15, 3],
    );
    assertEquals([r.sentAtMs, r.endAtMs], [250, 1750], "times on the run's clock");
    assertEquals(r.arrivalsMs, [...Array(10).fill(1000), ...Array(5).fill(1500)]);
    // The reader takes one token per 100 ms from 1 s on; the second group waits its turn at 2 s.
    assertEquals(r.displayMs, Array.from({ length: 15 }, (_, j) => 1000 + 100 * j));
    // Unread when each token arrives: 0,0,1..8 in the burst; at 1.5 s tokens 6..9 are still unread.
    assertEquals(bufferAtArrivals(r.arrivalsMs, r.displayMs), [
      0,
      0,
      1,
      2,
      3,
      4,
      5,
      6,
      7,
      8,
      4,
      5,
      6,
      7,
      8,
    ]);
    const m = requestMetrics(r);
    assertEquals(
      [m.ttftMs, m.stallMs, m.tbtMet],
      [1000, 0, 13],
      "the 500 ms gap misses the 300 ms TBT SLO",
    );
    // L = 15: weight (30 - 10 B) / 15 clamped: B = 0, 0, 1 count fully, B = 2 counts 2/3.
    assert(Math.abs(m.effectiveTokens - (3 + 2 / 3)) < 1e-12, `effective ${m.effectiveTokens}`);
  });
});

Deno.test("client: generation times per chunk from Sluice's sluice_timing", () => {
  const timed = (t: unknown) => ({ ...chunk("ab"), sluice_timing: t });
  assertEquals(generatedInChunk(timed({ generated_ms: 12.5 }), 1), [12.5]);
  assertEquals(
    generatedInChunk(timed({ generated_ms: 9, tokens_generated_ms: [4, 9] }), 2),
    [4, 9],
  );
  // A per-token list of the wrong length falls back to the chunk's time for every token.
  assertEquals(generatedInChunk(timed({ generated_ms: 9, tokens_generated_ms: [9] }), 2), [9, 9]);
  assertEquals(generatedInChunk(chunk("a"), 1), null, "no timing: another server");
  assertEquals(generatedInChunk(timed({ generated_ms: "soon" }), 1), null);
});

Deno.test("client: records the server's generation times beside arrivals", async () => {
  const clock = { t: 0 };
  const seen = { n: 0 };
  // All 15 generated by 60 ms, then sent in two groups as a pacing server would.
  const s = scripted(
    [{ at: 1000, tokens: 10 }, { at: 1500, tokens: 5, end: true }],
    clock,
    seen,
    (i) => 50 + i,
  );
  await withServer(s.handler, async (t) => {
    const r = await runClient(t, REQ, PROMPT, {
      model: "tiny",
      timeoutMs: 20_000,
      runStartMs: 0,
      now: () => clock.t,
      onToken: () => seen.n++,
    });
    assertEquals(r.generatedMs, Array.from({ length: 15 }, (_, i) => 50 + i));
    assertEquals(r.arrivalsMs.length, 15);
    // Buffers at generation: token 0 is read at 1 s, so at 50 + j ms all j earlier ones wait.
    // L = 15: weight (30 - 10 B) / 15 clamped: B = 0, 1 count fully, B = 2 counts 2/3.
    const m = requestMetrics(r);
    assertEquals(m.bufferSource, "server");
    assert(Math.abs(m.effectiveTokens - (2 + 2 / 3)) < 1e-12, `effective ${m.effectiveTokens}`);
    assertEquals(m.ttftMs, 1000, "TTFT stays on arrivals");
  });
  // A server that sends no timing leaves the record without generation times.
  const plain = scripted([{ at: 10, tokens: 2, end: true }], clock, { n: 0 });
  await withServer(plain.handler, async (t) => {
    const r = await runClient(t, REQ, PROMPT, { model: "m", timeoutMs: 20_000, runStartMs: 0 });
    assertEquals([r.outcome, r.arrivalsMs.length, r.generatedMs], ["ok", 2, undefined]);
  });
});

Deno.test("client: a late token is a stall the reader sits through", async () => {
  const clock = { t: 0 };
  const seen = { n: 0 };
  const s = scripted([{ at: 400, tokens: 2 }, { at: 1300, tokens: 1, end: true }], clock, seen);
  await withServer(s.handler, async (t) => {
    const r = await runClient(t, { ...REQ, outputLen: 3 }, { prompt: [1], maxTokens: 3 }, {
      model: "m",
      timeoutMs: 20_000,
      runStartMs: 0,
      now: () => clock.t,
      onToken: () => seen.n++,
    });
    assertEquals([r.arrivalsMs, r.displayMs], [[400, 400, 1300], [400, 500, 1300]]);
    assertEquals(requestMetrics(r).stallMs, 700, "token 3 was due at 0.6 s and came at 1.3 s");
  });
});

Deno.test("client: refused, failed, broken, timed out, cancelled and zero-output requests", async () => {
  let posts = 0;
  let sawHangup: () => void;
  const hungUp = new Promise<void>((r) => (sawHangup = r));
  let release: () => void;
  const never = new Promise<void>((r) => (release = r));
  const handler = async (req: Request) => {
    const body = await req.json();
    posts++;
    const stream = (text: string) =>
      new Response(text, { headers: { "content-type": "text/event-stream" } });
    switch (body.model) {
      case "full":
        return Response.json({ error: { message: "queue full", type: "rate_limit" } }, {
          status: 429,
          headers: { "retry-after": "3" },
        });
      case "boom":
        return Response.json({
          error: { message: "boom", type: "server_error", param: null, code: null },
        }, { status: 500 });
      case "cut":
        return stream(sse(chunk("a")) + sse(chunk("b")));
      case "fault":
        return stream(sse(chunk("a")) + sse({ error: { message: "engine fault" } }));
      case "garbled":
        return stream("data: {not json\n\n");
      case "zero":
        return stream(
          sse({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 0 } }) + sse("[DONE]"),
        );
      case "silent":
        await never;
        return new Response("late");
      case "endless": {
        let timer: ReturnType<typeof setTimeout> | undefined;
        let i = 0;
        return new Response(
          new ReadableStream<Uint8Array>({
            start(c) {
              const tick = () => {
                c.enqueue(enc.encode(sse(chunk(`t${i++}`))));
                timer = setTimeout(tick, 10);
              };
              tick();
            },
            cancel() {
              clearTimeout(timer);
              sawHangup();
            },
          }),
          { headers: { "content-type": "text/event-stream" } },
        );
      }
    }
    return new Response("?", { status: 400 });
  };
  await withServer(handler, async (t) => {
    const run = (
      model: string,
      w: Partial<WorkloadRequest> = {},
      extra: { timeoutMs?: number; signal?: AbortSignal } = {},
    ) =>
      runClient(t, { ...REQ, ...w }, PROMPT, {
        model,
        timeoutMs: extra.timeoutMs ?? 10_000,
        signal: extra.signal,
        runStartMs: 0,
      });

    const refused = await run("full");
    assertEquals([
      refused.outcome,
      refused.httpStatus,
      refused.retryAfterS,
      refused.arrivalsMs.length,
    ], ["refused", 429, 3, 0]);
    assertEquals(posts, 1, "a refused request is not retried");
    const boom = await run("boom");
    assertEquals([boom.outcome, boom.error], ["failed", "HTTP 500: boom"]);
    const cut = await run("cut");
    assertEquals([cut.outcome, cut.error, cut.arrivalsMs.length], [
      "failed",
      "stream ended without [DONE]",
      2,
    ]);
    const fault = await run("fault");
    assertEquals([fault.outcome, fault.arrivalsMs.length], ["failed", 1]);
    assert(fault.error?.includes("engine fault"), fault.error ?? "");
    assertEquals((await run("garbled")).outcome, "failed");
    const zero = await run("zero", { outputLen: 0 });
    assertEquals([zero.outcome, zero.arrivalsMs, zero.usageCompletionTokens], ["ok", [], 0]);

    const slow = await run("silent", {}, { timeoutMs: 150 });
    assertEquals([slow.outcome, slow.error], ["timeout", "per-request timeout"]);
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 100);
    const cutOff = await run("silent", {}, { signal: stop.signal });
    assertEquals([cutOff.outcome, cutOff.error], ["timeout", "run deadline"]);

    const cancelled = await run("endless", { cancelAfterTokens: 3 });
    assertEquals([cancelled.outcome, cancelled.arrivalsMs.length, cancelled.displayMs.length], [
      "cancelled",
      3,
      3,
    ]);
    let guard: ReturnType<typeof setTimeout> | undefined;
    const observed = await Promise.race([
      hungUp.then(() => true),
      new Promise<boolean>((r) => (guard = setTimeout(() => r(false), 10_000))),
    ]);
    clearTimeout(guard);
    assert(observed, "the server saw the client hang up");
    release!();
  });
});

/** A small in-process stand-in for the server: SSE completions and a /metrics exposition. */
function fakeSluice(delayMs: number) {
  let running = 0;
  let served = 0;
  const prompts: number[][] = [];
  const handler = async (req: Request) => {
    const path = new URL(req.url).pathname;
    if (path === "/metrics") {
      return new Response(
        `# TYPE sluice_running_requests gauge\nsluice_running_requests ${running}\n` +
          `sluice_kv_blocks_used{tier="device"} ${
            running * 2
          }\nsluice_tokens_generated_total ${served}\n`,
      );
    }
    if (path === "/v1/models") {
      return Response.json({ data: [{ id: "fake-model", vocab_size: 500, max_model_len: 64 }] });
    }
    const body = await req.json();
    prompts.push(body.prompt);
    running++;
    let i = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        const tick = () => {
          if (i < body.max_tokens) {
            served++;
            c.enqueue(enc.encode(sse(chunk(`t${i++}`))));
            timer = setTimeout(tick, delayMs);
            return;
          }
          running--;
          c.enqueue(enc.encode(sse(chunk("", "length")) + sse("[DONE]")));
          c.close();
        };
        tick();
      },
      cancel() {
        clearTimeout(timer);
        running--;
      },
    });
    return new Response(stream, { headers: { "content-type": "text/event-stream" } });
  };
  return { handler, prompts };
}

Deno.test("replay: one client per request at its arrival, scraping /metrics, bounded by the deadline", async () => {
  const fake = fakeSluice(5);
  const workload = parseTrace(
    [
      `{"arrival_s": 0, "prompt_len": 100, "output_len": 6}`,
      `{"arrival_s": 0.05, "prompt_len": 10, "output_len": 4, "reading_rate": 50}`,
      `{"arrival_s": 0.1, "prompt_ids": [1, 2, 3], "output_len": 5}`,
      `{"arrival_s": 60, "prompt_len": 10, "output_len": 5}`,
    ].join("\n"),
    {
      seed: 1,
      readingRate: { kind: "fixed", value: 20 },
      sloTtftMs: 1000,
      sloTbtMs: 100,
      maxRequests: 10,
    },
  );
  await withServer(fake.handler, async (t) => {
    const model = await modelInfo(t, "unused");
    assertEquals(model, { id: "fake-model", vocabSize: 500, vocabGuessed: false, maxContext: 64 });
    const r = await replay(t, workload, {
      model,
      requestTimeoutMs: 10_000,
      deadlineMs: 3000,
      scrapeIntervalMs: 50,
    });
    assertEquals(r.records.map((x) => [x.id, x.outcome, x.arrivalsMs.length]), [
      [0, "ok", 6],
      [1, "ok", 4],
      [2, "ok", 5],
      [3, "timeout", 0],
    ]);
    assertEquals(r.records[3].error, "not sent: run deadline");
    const sent = r.records.slice(0, 3).map((x) => x.sentAtMs);
    assert(sent[0] <= sent[1] && sent[1] <= sent[2], `sent in arrival order: ${sent}`);
    // The 100-token prompt was clamped to the 64-token context minus its 6 output tokens.
    assertEquals(fake.prompts.map((p) => p.length), [58, 10, 3]);
    assert(
      fake.prompts.flat().every((id) => id >= 0 && id < 500),
      "ids within the reported vocabulary",
    );
    assert(r.scrapes.length >= 2, `baseline and final scrape at least (${r.scrapes.length})`);
    const last = r.scrapes[r.scrapes.length - 1].samples.find((s) =>
      s.name === "sluice_tokens_generated_total"
    );
    assertEquals(last?.value, 15);
  });
});

/** The fake server program for the launcher and the end-to-end run: main.ts serve's flags,
 * log line, /health, /v1/models, SSE completions, /metrics, SIGTERM. */
const FAKE_SERVER = `
import { parseArgs } from "node:util";
const { values } = parseArgs({ args: Deno.args, strict: true, options: {
  host: { type: "string" }, port: { type: "string" }, model: { type: "string" },
  "delay-ms": { type: "string", default: "5" }, "max-running": { type: "string", default: "100" },
  "fail-start": { type: "boolean", default: false }, silent: { type: "boolean", default: false },
  "ignore-term": { type: "boolean", default: false }, timing: { type: "boolean", default: false },
} });
if (values["fail-start"]) { console.error("cannot load model"); Deno.exit(3); }
const enc = new TextEncoder();
const readyAt = performance.now() + 200;
let running = 0, tokens = 0, preemptions = 0;
const json = (b, status = 200, headers = {}) => new Response(JSON.stringify(b), { status, headers: { "content-type": "application/json", ...headers } });
const server = Deno.serve({ hostname: values.host, port: Number(values.port), onListen: ({ hostname, port }) => {
  if (!values.silent) console.error("fake sluice: listening on http://" + hostname + ":" + port);
} }, async (req) => {
  const path = new URL(req.url).pathname;
  if (path === "/health") return performance.now() < readyAt ? json({ status: "loading" }, 503) : json({ status: "ready" });
  if (path === "/v1/models") return json({ data: [{ id: values.model, vocab_size: 1000 }] });
  if (path === "/metrics") return new Response(
    'sluice_kv_blocks_used{tier="device"} ' + running * 3 + '\\nsluice_kv_blocks_total{tier="device"} 32\\n' +
    'sluice_kv_blocks_used{tier="host"} ' + running + '\\nsluice_preemptions_total ' + preemptions + '\\n' +
    'sluice_tokens_generated_total ' + tokens + '\\n');
  const body = await req.json();
  if (running >= Number(values["max-running"])) return json({ error: { message: "queue full" } }, 429, { "retry-after": "1" });
  running++;
  if (running > 1) preemptions++;
  // --timing: every token is "generated" at once, 0.5 ms apart, and paced out (Sluice's timing).
  const timed = values.timing && body.stream_options?.include_timing === true;
  let i = 0, timer, closed = false;
  const done = () => { if (!closed) { closed = true; running--; } };
  return new Response(new ReadableStream({
    start(c) {
      const send = (o) => c.enqueue(enc.encode("data: " + (typeof o === "string" ? o : JSON.stringify(o)) + "\\n\\n"));
      const tick = () => {
        if (i < body.max_tokens) { tokens++; send({ choices: [{ index: 0, text: "t" + i, finish_reason: null }], ...(timed ? { sluice_timing: { generated_ms: i * 0.5 } } : {}) }); i++; timer = setTimeout(tick, Number(values["delay-ms"])); return; }
        send({ choices: [{ index: 0, text: "", finish_reason: "length" }] });
        send({ choices: [], usage: { prompt_tokens: body.prompt.length, completion_tokens: i } });
        send("[DONE]"); done(); c.close();
      };
      timer = setTimeout(tick, 20);
    },
    cancel() { clearTimeout(timer); done(); },
  }), { headers: { "content-type": "text/event-stream" } });
});
Deno.addSignalListener("SIGTERM", () => {
  if (values["ignore-term"]) return;
  server.shutdown().then(() => Deno.exit(0));
});
`;

async function fakeServerProgram(): Promise<{ dir: string; command: string[] }> {
  const dir = await Deno.makeTempDir({ prefix: "sluice-bench-serve-" });
  await Deno.writeTextFile(`${dir}/fake_server.ts`, FAKE_SERVER);
  return { dir, command: [Deno.execPath(), "run", "-A", "--no-config", `${dir}/fake_server.ts`] };
}

async function portIsClosed(port: number): Promise<boolean> {
  try {
    const c = await Deno.connect({ hostname: "127.0.0.1", port });
    c.close();
    return false;
  } catch {
    return true;
  }
}

Deno.test("server launcher: ready after /health, stopped by SIGTERM or SIGKILL, failures reported", async () => {
  const { dir, command } = await fakeServerProgram();
  try {
    const s = await startServer({
      command,
      model: "m",
      flags: [],
      startTimeoutMs: 60_000,
      logPath: `${dir}/a.log`,
    });
    assertEquals((await getText(s.target, "/health", 2000)).status, 200);
    assert(s.logTail().includes(`listening on http://127.0.0.1:${s.target.port}`));
    const st = await s.stop();
    assertEquals([st.code, st.signal], [0, null], "graceful exit on SIGTERM");
    assert(await portIsClosed(s.target.port));
    assert(
      (await Deno.readTextFile(`${dir}/a.log`)).includes("listening on"),
      "output saved to the log file",
    );

    const stubborn = await startServer({
      command,
      model: "m",
      flags: ["--ignore-term"],
      startTimeoutMs: 60_000,
      stopGraceMs: 300,
    });
    assertEquals((await stubborn.stop()).signal, "SIGKILL");
    assert(await portIsClosed(stubborn.target.port));

    await assertRejects(
      () => startServer({ command, model: "m", flags: ["--fail-start"], startTimeoutMs: 60_000 }),
      /exited \(code 3\) before listening[\s\S]*cannot load model/,
    );
    await assertRejects(
      () => startServer({ command, model: "m", flags: ["--silent"], startTimeoutMs: 1500 }),
      /did not log/,
    );
    assertThrows(() => assertSafeFlags(["--gpu-kv-mb", "24", "--host=0.0.0.0"]), /not allowed/);
    await assertRejects(
      () => startServer({ command, model: "m", flags: ["--port", "80"], startTimeoutMs: 1000 }),
      /not allowed/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("bench serve: two configurations, one workload, a report folder", async () => {
  const { dir, command } = await fakeServerProgram();
  try {
    const trace = [0, 0.05, 0.1].map((t, i) =>
      JSON.stringify({ arrival_s: t, prompt_len: 20 + i, output_len: 12, reading_rate: 40 })
    );
    await Deno.writeTextFile(`${dir}/trace.jsonl`, trace.join("\n") + "\n");
    const lines: string[] = [];
    const md = await benchServe(
      [
        "--configs",
        "quick=--delay-ms 5 --timing;narrow=--delay-ms 30 --max-running 1",
        "--baseline",
        "narrow",
        "--workload",
        "trace",
        "--trace",
        `${dir}/trace.jsonl`,
        "--out",
        `${dir}/out`,
        "--warmup",
        "1",
        "--request-timeout-s",
        "30",
        "--deadline-s",
        "60",
        "--scrape-ms",
        "100",
      ],
      { serverCommand: command, log: (l) => lines.push(l), savedMarkdownDir: dir },
    );
    const [folder] = [...Deno.readDirSync(`${dir}/out`)].map((e) => `${dir}/out/${e.name}`);
    const files = [...Deno.readDirSync(folder)].map((e) => e.name).sort();
    assertEquals(files, [
      "buffer_narrow.svg",
      "buffer_quick.svg",
      "kv_blocks.svg",
      "kv_narrow.svg",
      "kv_quick.svg",
      "report.md",
      "results-narrow.json",
      "results-quick.json",
      "server-narrow.log",
      "server-quick.log",
      "ttft_cdf.svg",
      "workload.jsonl",
    ]);
    const saved = parseTrace(await Deno.readTextFile(`${folder}/workload.jsonl`), {
      seed: 0,
      readingRate: { kind: "fixed", value: 1 },
      sloTtftMs: 1,
      sloTbtMs: 1,
      maxRequests: 100,
    });
    assertEquals(saved.map((r) => [r.arrivalS, r.promptLen, r.outputLen, r.readingRate]), [
      [0, 20, 12, 40],
      [0.05, 21, 12, 40],
      [0.1, 22, 12, 40],
    ]);
    const quick = JSON.parse(await Deno.readTextFile(`${folder}/results-quick.json`));
    const narrow = JSON.parse(await Deno.readTextFile(`${folder}/results-narrow.json`));
    assertEquals(quick.records.map((r: any) => [r.outcome, r.arrivalsMs.length]), [["ok", 12], [
      "ok",
      12,
    ], ["ok", 12]]);
    // One stream at a time: the two that arrive while the first is streaming are refused.
    assertEquals(narrow.records.map((r: any) => r.outcome).sort(), ["ok", "refused", "refused"]);
    assert(
      quick.scrapes.length >= 2 && quick.server.kvBlocks.length === 2,
      "KV blocks per tier scraped",
    );
    // quick's server reports when it generated each token (all at once, then paced): its buffer
    // is measured from those, and effective falls below raw; narrow's is not.
    assertEquals(quick.summary.bufferSource, "server");
    assertEquals(narrow.summary.bufferSource, "client");
    assert(
      quick.summary.effectiveTokensPerS < quick.summary.rawTokensPerS,
      JSON.stringify(quick.summary),
    );
    assert(
      quick.records.every((r: any) => r.generatedMs.length === r.arrivalsMs.length),
      "generation times recorded per token",
    );
    const report = await Deno.readTextFile(`${folder}/report.md`);
    assert(report.includes("| refused (429) | **0** | 2 |"), report);
    assert(report.includes("Each configuration against `narrow`"), report);
    assert(
      report.includes("| refused or failed that the baseline served | 0 | — | 0 met |"),
      report,
    );
    assert(
      report.includes(
        "| unread buffer measured from | server's generation times | client arrivals (no server timing) |",
      ),
      report,
    );
    assert(report.includes("![TTFT CDF](ttft_cdf.svg)"));
    const rel = folder.slice(dir.length + 1);
    assert(
      md.includes(`![TTFT CDF](${rel}/ttft_cdf.svg)`),
      "returned Markdown links into the folder",
    );
    for (const f of files.filter((f) => f.endsWith(".svg"))) {
      const svg = await Deno.readTextFile(`${folder}/${f}`);
      assert(svg.startsWith("<svg ") && svg.trimEnd().endsWith("</svg>"), f);
    }
    // Both servers are gone: the ports in their logs no longer accept connections.
    for (const name of ["quick", "narrow"]) {
      const log = await Deno.readTextFile(`${folder}/server-${name}.log`);
      const port = Number(/listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log)![1]);
      assert(await portIsClosed(port), `${name} server stopped`);
    }
    assert(lines.some((l) => l.startsWith("[narrow] done")), lines.join("\n"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
