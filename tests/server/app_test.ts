// The assembled app: every bad input gets an OpenAI error envelope (never a crash), the API key and
// body limit guard /v1, unknown routes get a 404 envelope, and each of these counts once in
// sluice_requests_total by its status.

import { sampleValue } from "../../server/metrics/parse.ts";
import { assert, assertEquals, assertMatch } from "../helpers/testing.ts";
import { MODEL_ID, startServer } from "./harness.ts";

Deno.test("app: bad input gets OpenAI error envelopes, never a crash", async () => {
  const s = await startServer();
  try {
    const chat = { model: MODEL_ID, messages: [{ role: "user", content: "x" }] };
    const cases: [string, unknown, number, RegExp, string | null, string | null][] = [
      ["/v1/chat/completions", "{not json", 400, /not valid JSON/, null, "invalid_json"],
      ["/v1/chat/completions", { model: MODEL_ID }, 400, /messages/, "messages", "invalid_value"],
      ["/v1/chat/completions", { ...chat, messages: "hi" }, 400, /messages/, "messages", null],
      [
        "/v1/chat/completions",
        { ...chat, temperature: "hot" },
        400,
        /temperature/,
        "temperature",
        null,
      ],
      // Chat takes n up to 8; completions only 1.
      ["/v1/chat/completions", { ...chat, n: 9 }, 400, /8/, "n", null],
      ["/v1/completions", { model: MODEL_ID, prompt: "hi", n: 2 }, 400, /n = 1/, "n", null],
      [
        "/v1/chat/completions",
        { ...chat, model: "gpt-9" },
        404,
        /does not exist/,
        "model",
        "model_not_found",
      ],
      // Limits come from the runtime, with the body's field name.
      [
        "/v1/chat/completions",
        { ...chat, max_tokens: 100000 },
        400,
        /max_tokens/,
        "max_tokens",
        null,
      ],
      [
        "/v1/completions",
        { model: MODEL_ID, prompt: [1, 99999] },
        400,
        /vocabulary/,
        "prompt",
        null,
      ],
      [
        "/v1/completions",
        { model: MODEL_ID, prompt: [1], logprobs: 21 },
        400,
        /logprobs/,
        "logprobs",
        null,
      ],
      [
        "/v1/chat/completions",
        { ...chat, messages: [{ role: "user", content: "x".repeat(70_000) }] },
        413,
        /exceeds/,
        null,
        "request_too_large",
      ],
    ];
    for (const [path, body, status, message, param, code] of cases) {
      const res = await s.post(path, body);
      const json = await res.json();
      assertEquals(res.status, status, JSON.stringify(json));
      assertMatch(json.error.message, message);
      assertEquals(json.error.param, param);
      if (code) assertEquals(json.error.code, code);
      assert(typeof json.error.type === "string");
    }
    const wrongType = await s.post("/v1/completions", "{}", {
      headers: { "content-type": "text/plain" },
    });
    assertEquals(wrongType.status, 415);
    assertEquals((await wrongType.json()).error.code, "invalid_content_type");

    const context = s.runtime.info.maxContext;
    for (
      const [path, body] of [
        ["/v1/completions", {
          model: MODEL_ID,
          prompt: Array.from({ length: context + 5 }, (_, i) => i % 50),
        }],
        ["/v1/chat/completions", {
          model: MODEL_ID,
          messages: [{ role: "user", content: "ab ".repeat(context) }],
        }],
      ] as const
    ) {
      const res = await s.post(path, body);
      const json = await res.json();
      assertEquals(res.status, 400);
      assertEquals(json.error.code, "context_length_exceeded");
      assertEquals(json.error.param, path === "/v1/completions" ? "prompt" : "messages");
    }

    const unknown = await fetch(s.url + "/v2/nothing");
    assertEquals(unknown.status, 404);
    assertEquals((await unknown.json()).error.code, "not_found");

    const m = await s.scrape();
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "400" }), 11);
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "415" }), 1);
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "404" }), 1); // the model; /v2 is not counted
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "413" }), 1);
    assertEquals(s.metrics.openRequests, 0);
  } finally {
    await s.close();
  }
});

Deno.test("app: Anthropic's x-api-key header carries the key as well as a bearer token", async () => {
  const s = await startServer({ config: { apiKey: "sekret" } });
  try {
    const ok = await fetch(s.url + "/v1/models", { headers: { "x-api-key": "sekret" } });
    assertEquals(ok.status, 200);
    await ok.body?.cancel();
    const wrong = await fetch(s.url + "/v1/models", { headers: { "x-api-key": "nope" } });
    assertEquals(wrong.status, 401);
    await wrong.body?.cancel();
  } finally {
    await s.close();
  }
});

Deno.test("app: the API key guards /v1 but not /health or /metrics", async () => {
  const s = await startServer({ config: { apiKey: "sekret" } });
  try {
    const denied = await fetch(s.url + "/v1/models");
    assertEquals(denied.status, 401);
    const body = await denied.json();
    assertEquals(body.error.type, "authentication_error");
    assertEquals(body.error.code, "invalid_api_key");
    const wrong = await fetch(s.url + "/v1/models", { headers: { authorization: "Bearer nope" } });
    assertEquals(wrong.status, 401);
    await wrong.body?.cancel();
    const models = await s.client.models.list(); // the client sends the key
    assertEquals(models.data[0].id, MODEL_ID);
    const r = await s.client.completions.create({ model: MODEL_ID, prompt: "a", max_tokens: 2 });
    assert(r.choices[0].text !== undefined);
    assertEquals((await fetch(s.url + "/health")).status, 200);
    const m = await s.scrape();
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "401" }), 2);
    assertEquals(sampleValue(m, "sluice_requests_total", { status: "200" }), 2);
  } finally {
    await s.close();
  }
});
