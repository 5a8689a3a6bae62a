// The model router over HTTP, with fake-engine models: /v1/models lists every model and whether it
// is loaded; a request loads the model it names (concurrent first requests load it once); an
// unknown name is a 404 naming the ids; a stream in flight is never cut by a load that needs its
// room (the load waits, the stream finishes whole); Ollama's ps, tags and keep_alive 0; /metrics
// per model.

import Anthropic from "@anthropic-ai/sdk";
import { Ollama } from "ollama";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { sseData, startServer } from "../harness.ts";

const chat = (model: string, extra: Record<string, unknown> = {}) => ({
  model,
  messages: [{ role: "user", content: "hi" }],
  max_tokens: 4,
  temperature: 0,
  ...extra,
});

Deno.test("model router over HTTP: list, load on demand (once), 404 naming the ids", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  const s = await startServer({ router: { ids: ["alpha", "beta"], loadDelay: () => gate } });
  try {
    const listed = async () =>
      (await (await fetch(`${s.url}/v1/models`)).json()).data.map((
        m: { id: string; loaded: boolean; status: string },
      ) => [m.id, m.loaded, m.status]);
    assertEquals(await listed(), [["alpha", false, "unloaded"], ["beta", false, "unloaded"]]);
    // Two first requests for beta while it loads: one load, both answered.
    const both = Promise.all([
      s.post("/v1/chat/completions", chat("beta")),
      s.post("/v1/chat/completions", chat("beta")),
    ]);
    await new Promise((r) => setTimeout(r, 50));
    assertEquals(await listed(), [["alpha", false, "unloaded"], ["beta", false, "loading"]]);
    release();
    const answers = await both;
    for (const r of answers) {
      const body = await r.json();
      assertEquals(r.status, 200, JSON.stringify(body));
      assertEquals(body.model, "beta");
    }
    assertEquals(s.opens, ["beta"]);
    assertEquals(await listed(), [["alpha", false, "unloaded"], ["beta", true, "ready"]]);
    const missing = await s.post("/v1/chat/completions", chat("gamma"));
    assertEquals(missing.status, 404);
    const { error } = await missing.json();
    assertEquals(error.code, "model_not_found");
    assert(error.message.includes("alpha, beta"), error.message);
    // Without a model, or "default": the first one.
    const plain = await s.post("/v1/completions", { model: "default", prompt: "x", max_tokens: 2 });
    assertEquals((await plain.json()).model, "alpha");
    // /metrics says which are loaded, and labels vLLM's series by model.
    const m = await s.scrape();
    const loaded = m.get("sluice_model_loaded")!.map((x) => [x.labels.model, x.value]);
    assertEquals(loaded.sort(), [["alpha", 1], ["beta", 1]]);
    const ttft = m.get("vllm:time_to_first_token_seconds_count")!;
    assert(ttft.some((x) => x.labels.model_name === "beta" && x.value >= 2), JSON.stringify(ttft));
  } finally {
    await s.close();
  }
});

Deno.test("model router over HTTP: a load that needs a streaming model's room waits; the stream is not cut", async () => {
  const s = await startServer({ router: { ids: ["alpha", "beta"], maxLoaded: 1 } });
  try {
    const events: string[] = [];
    const stream = s.post("/v1/chat/completions", chat("alpha", { stream: true, max_tokens: 120 }))
      .then(async (r) => {
        const data = await sseData(r);
        events.push("alpha done");
        return data;
      });
    // Let alpha load and start streaming, then ask for beta: only one model fits.
    while (s.opens.length === 0) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 30));
    const other = s.post("/v1/chat/completions", chat("beta")).then(async (r) => {
      events.push("beta answered");
      return [r.status, await r.json()] as const;
    });
    const data = await stream;
    const [status, body] = await other;
    assertEquals(status, 200, JSON.stringify(body));
    assertEquals(events, ["alpha done", "beta answered"]);
    const last = JSON.parse(data.at(-2)!);
    assertEquals(last.choices[0].finish_reason, "length", "alpha's stream ran to its max_tokens");
    assertEquals(s.opens, ["alpha", "beta"]);
    const ids = (await (await fetch(`${s.url}/v1/models`)).json()).data
      .filter((m: { loaded: boolean }) => m.loaded).map((m: { id: string }) => m.id);
    assertEquals(ids, ["beta"], "alpha was evicted once idle");
  } finally {
    await s.close();
  }
});

Deno.test("model router over HTTP: Ollama's tags and ps, keep_alive 0 unloads, -1 keeps", async () => {
  const s = await startServer({ router: { ids: ["alpha", "beta:q8"], keepAliveMs: 60_000 } });
  const ollama = new Ollama({ host: s.url });
  try {
    const tags = await ollama.list();
    assertEquals(tags.models.map((m) => m.name), ["alpha:latest", "beta:q8"]);
    assertEquals((await ollama.ps()).models, []);
    const loaded = await ollama.generate({ model: "alpha", prompt: "" });
    assertEquals(loaded.done_reason, "load");
    await ollama.generate({
      model: "beta:q8",
      prompt: "hi",
      keep_alive: -1,
      options: { num_predict: 2 },
    });
    const ps = await ollama.ps();
    assertEquals(ps.models.map((m) => m.name).sort(), ["alpha:latest", "beta:q8"]);
    const beta = ps.models.find((m) => m.name === "beta:q8")!;
    assert(new Date(beta.expires_at).getFullYear() >= 9999, "keep_alive -1: never");
    const alpha = ps.models.find((m) => m.name === "alpha:latest")!;
    const inMs = new Date(alpha.expires_at).getTime() - Date.now();
    assert(inMs > 50_000 && inMs <= 61_000, `alpha expires in ${inMs} ms`);
    const unloaded = await ollama.generate({ model: "alpha", prompt: "", keep_alive: 0 });
    assertEquals(unloaded.done_reason, "unload");
    assertEquals((await ollama.ps()).models.map((m) => m.name), ["beta:q8"]);
  } finally {
    await s.close();
  }
});

Deno.test("model router over HTTP: a stream for a model still loading gets keep-alives, then its stream; a failed load an error event", async () => {
  let release!: () => void;
  let fail = false;
  const gate = new Promise<void>((r) => release = r);
  const s = await startServer({
    config: { sseKeepAliveMs: 20 },
    router: {
      ids: ["alpha", "beta"],
      loadDelay: async () => {
        await gate;
        if (fail) throw new Error("weights unreadable");
      },
    },
  });
  try {
    const res = await s.post("/v1/chat/completions", chat("beta", { stream: true }));
    assertEquals(res.headers.get("content-type"), "text/event-stream");
    const reader = res.body!.getReader();
    const text = new TextDecoder();
    let head = "";
    while (!head.includes(": keep-alive")) head += text.decode((await reader.read()).value);
    assert(head.startsWith(": loading model 'beta'\n\n"), head);
    release();
    let rest = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += text.decode(value);
    }
    const data = rest.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
    assertEquals(data.at(-1), "[DONE]");
    assertEquals(JSON.parse(data[0]).model, "beta");
    // The official client reads such a stream as any other (comments are not events).
    await s.state.models.unload("beta");
    const stream = await s.client.chat.completions.create({
      model: "beta",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
      stream: true,
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert(chunks.length > 0 && chunks.every((c) => c.model === "beta"));
    // A load that fails ends the stream with one OpenAI error event.
    await s.state.models.unload("beta");
    fail = true;
    const failed = await s.post("/v1/chat/completions", chat("beta", { stream: true }));
    const events = (await failed.text()).split("\n").filter((l) => l.startsWith("data: "));
    assertEquals(events.length, 1);
    assertEquals(JSON.parse(events[0].slice(6)).error.code, "model_failed");
  } finally {
    await s.close();
  }
});

Deno.test("model router over HTTP: Responses and Messages streams wait for a load too, each client reading them as usual", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  const s = await startServer({
    config: { sseKeepAliveMs: 20 },
    router: { ids: ["alpha", "beta", "gamma"], loadDelay: () => gate },
  });
  try {
    const responses = (async () => {
      const events = [];
      const stream = await s.client.responses.create({
        model: "beta",
        input: "hi",
        max_output_tokens: 4,
        stream: true,
      });
      for await (const ev of stream) events.push(ev.type);
      return events;
    })();
    const anthropic = new Anthropic({ baseURL: s.url, apiKey: "none", maxRetries: 0 });
    const messages = (async () => {
      const events = [];
      const stream = await anthropic.messages.create({
        model: "gamma",
        max_tokens: 4,
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      });
      for await (const ev of stream) events.push(ev.type);
      return events;
    })();
    await new Promise((r) => setTimeout(r, 60));
    release();
    const [r, m] = await Promise.all([responses, messages]);
    assertEquals(r[0], "response.created");
    // Four tokens: complete, or cut by max_output_tokens ("incomplete"), but a whole stream.
    assert(["response.completed", "response.incomplete"].includes(r.at(-1)!), r.at(-1));
    assertEquals([m[0], m.at(-1)], ["message_start", "message_stop"]);
    assertEquals(s.opens.sort(), ["beta", "gamma"]);
  } finally {
    await s.close();
  }
});
