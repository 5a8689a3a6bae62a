// The Origin check and CORS: requests from the server's own page and from no page pass, listed
// origins get CORS headers and answered preflights (even with an API key), and any other page is
// refused with 403, preflight included.

import { isSameOrigin } from "../../../server/middleware/cross_origin.ts";
import { createApp, type ServerConfig } from "../../../server/app.ts";
import { ServerMetrics } from "../../../server/metrics/server_metrics.ts";
import { startingState } from "../../helpers/model_router.ts";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";

const HOST = "127.0.0.1:8080";

function app(config: Partial<ServerConfig> = {}) {
  return createApp(startingState(), { maxBodyBytes: 1024, ...config }, new ServerMetrics());
}

/** A request as a browser page at `origin` would send it to http://127.0.0.1:8080. */
async function call(
  a: ReturnType<typeof app>,
  path: string,
  origin: string | null,
  init: RequestInit = {},
): Promise<{ status: number; headers: Headers; code: string | null }> {
  const headers: Record<string, string> = { host: HOST, ...init.headers as Record<string, string> };
  if (origin !== null) headers.origin = origin;
  const res = await a.request(path, { ...init, headers });
  const text = await res.text();
  const code = text ? JSON.parse(text).error?.code ?? null : null;
  return { status: res.status, headers: res.headers, code };
}

const CHAT = {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
};

Deno.test("cross origin: same origin", () => {
  assert(isSameOrigin("http://127.0.0.1:8080", "127.0.0.1:8080"));
  assert(isSameOrigin("http://LOCALHOST:8080", "localhost:8080"));
  assert(isSameOrigin("http://localhost", "localhost:80"), "default port");
  assert(isSameOrigin("https://box.lan", "box.lan"), "behind a TLS proxy");
  assert(!isSameOrigin("http://localhost:8080", "127.0.0.1:8080"), "another name");
  assert(!isSameOrigin("http://127.0.0.1:3000", "127.0.0.1:8080"), "another port");
  assert(!isSameOrigin("null", "127.0.0.1:8080"));
  assert(!isSameOrigin("file://", "127.0.0.1:8080"));
});

Deno.test("cross origin: by default only the server's own page and non-browser clients", async () => {
  const a = app();
  // No Origin (curl, SDKs) and the server's own origin (the playground) reach the route.
  assertEquals((await call(a, "/v1/models", null)).status, 200);
  const own = await call(a, "/v1/chat/completions", `http://${HOST}`, CHAT);
  assertEquals(own.code, "model_loading");
  assertEquals(own.headers.get("access-control-allow-origin"), null, "same origin needs no CORS");
  // Any other page is refused before the route runs, on reads and writes alike.
  for (const origin of ["http://evil.example", "http://localhost:8080", "null"]) {
    for (const [path, init] of [["/v1/models", {}], ["/v1/chat/completions", CHAT]] as const) {
      const r = await call(a, path, origin, init);
      assertEquals([r.status, r.code], [403, "origin_not_allowed"], `${origin} ${path}`);
      assertEquals(r.headers.get("access-control-allow-origin"), null);
    }
  }
  // The text/plain trick: a "simple" request a page may send without a preflight.
  const simple = await call(a, "/v1/chat/completions", "http://evil.example", {
    ...CHAT,
    headers: { "content-type": "text/plain;charset=application/json" },
  });
  assertEquals([simple.status, simple.code], [403, "origin_not_allowed"]);
  // A preflight from such a page fails too, so the browser never sends the request.
  const preflight = await call(a, "/v1/chat/completions", "http://evil.example", {
    method: "OPTIONS",
    headers: { "access-control-request-method": "POST" },
  });
  assertEquals(preflight.status, 403);
  assertEquals(preflight.headers.get("access-control-allow-origin"), null);
});

Deno.test("cross origin: --cors-origins lets listed pages call, with preflights", async () => {
  const page = "http://app.example:3000";
  const a = app({ corsOrigins: ["HTTP://App.Example:3000/"], apiKey: "k" });
  const preflight = await call(a, "/v1/chat/completions", page, {
    method: "OPTIONS",
    headers: {
      "access-control-request-method": "POST",
      "access-control-request-headers": "authorization, content-type",
      "access-control-request-private-network": "true",
    },
  });
  assertEquals(preflight.status, 204, "answered before the API key is asked for");
  assertEquals(preflight.headers.get("access-control-allow-origin"), page);
  assert(preflight.headers.get("access-control-allow-methods")!.includes("POST"));
  assertEquals(
    preflight.headers.get("access-control-allow-headers"),
    "authorization, content-type",
  );
  assertEquals(preflight.headers.get("vary"), "Origin");
  assertEquals(preflight.headers.get("access-control-allow-private-network"), "true");

  // The real request: errors carry the header too, so the page can read why.
  const denied = await call(a, "/v1/chat/completions", page, CHAT);
  assertEquals([denied.status, denied.code], [401, "invalid_api_key"]);
  assertEquals(denied.headers.get("access-control-allow-origin"), page);
  const authorized = await call(a, "/v1/chat/completions", page, {
    ...CHAT,
    headers: { ...CHAT.headers, authorization: "Bearer k" },
  });
  assertEquals(authorized.code, "model_loading");
  assertEquals(authorized.headers.get("access-control-allow-origin"), page);
  assertEquals(
    authorized.headers.get("access-control-expose-headers"),
    "Retry-After, Sluice-Request-Id",
  );
  // Listed means that origin only.
  assertEquals((await call(a, "/v1/models", "http://app.example:3001")).status, 403);
});

Deno.test("cross origin: `*` lets any page call", async () => {
  const a = app({ corsOrigins: ["*"] });
  const r = await call(a, "/v1/models", "http://anything.example");
  assertEquals(r.status, 200);
  assertEquals(r.headers.get("access-control-allow-origin"), "*");
  const preflight = await call(a, "/v1/completions", "null", {
    method: "OPTIONS",
    headers: { "access-control-request-method": "POST" },
  });
  assertEquals(preflight.status, 204);
  assertEquals(preflight.headers.get("access-control-allow-origin"), "*");
});

Deno.test("cross origin: a listed origin must be one", () => {
  for (const bad of ["app.example:3000", "http://app.example/path", "ftp://x", ""]) {
    assertThrows(() => app({ corsOrigins: [bad] }), /is not an origin/, bad);
  }
  app({ corsOrigins: ["https://app.example", "http://127.0.0.1:3000/", "*"] });
});
