// GET /health answered at the front door (server/routes/health.ts's healthAtTheDoor): the same
// answer as the route, in every state, without a turn through the HTTP server; what the door must
// not answer (a query string, a browser's Origin, a Host this server does not answer to, a
// pipelined probe behind a request in flight) goes through. And the issue-29 case: while eight
// ~1 MiB chat bodies arrive at once and are refused, every probe gets its 200. How quickly is a
// measurement, not a test: `deno task bench huge-prompts --kind chat` (p99 before and
// after in bench/results/health-under-bodies-29.md).

import assert from "node:assert/strict";
import { FrontDoor } from "../../../server/connections/front_door.ts";
import { hostPolicy } from "../../../server/middleware/host_check.ts";
import { healthAtTheDoor } from "../../../server/routes/health.ts";
import type { ServerState } from "../../../server/state/server_state.ts";
import { MODEL_ID, startServer } from "../harness.ts";
import { connect, parseResponse, readReply, send } from "./raw_http.ts";

/** A front door whose HTTP server only counts what reaches it, over `state`. */
function door(state: ServerState) {
  const reached: string[] = [];
  const server = new FrontDoor((req) => {
    const url = new URL(req.url);
    reached.push(url.pathname + url.search);
    return Response.json({ route: true });
  }, {
    hostname: "127.0.0.1",
    port: 0,
    maxConnections: 16,
    headerTimeoutMs: 10_000,
    keepAliveTimeoutMs: 5_000,
    maxHeadBytes: 48 * 1024,
    answerHere: healthAtTheDoor(state, hostPolicy("127.0.0.1")),
  });
  return { server, reached, url: `http://127.0.0.1:${server.addr.port}` };
}

Deno.test("health at the door: each state's answer, and only plain probes are answered there", async () => {
  const state = { model: { status: "loading" }, draining: false } as ServerState;
  const { server, reached, url } = door(state);
  try {
    const probe = async (init?: RequestInit, path = "/health") => {
      const res = await fetch(url + path, init);
      return [res.status, await res.json()];
    };
    assert.deepEqual(await probe(), [503, { status: "loading" }]);
    state.model = { status: "failed", error: "no weights in /home/someone/model" };
    const [status, failed] = await probe();
    assert.equal(status, 503);
    assert.equal(failed.status, "failed");
    assert.ok(!failed.error.includes("/home/someone"), "paths are redacted at the door too");
    state.model = { status: "ready" } as ServerState["model"];
    assert.deepEqual(await probe(), [200, { status: "ready" }]);
    state.draining = true;
    assert.deepEqual(await probe(), [503, { status: "draining" }]);
    state.draining = false;
    assert.deepEqual(reached, [], "every plain probe was answered at the door");

    // Through to the HTTP server: its middleware (CORS, host check) and routes decide these.
    await probe(undefined, "/health?verbose=1");
    await probe({ headers: { origin: "http://localhost:3000" } });
    await probe({ method: "HEAD" }).catch(() => {}); // a HEAD answer has no JSON body
    const conn = await connect(server.addr.port);
    try {
      await send(conn, "GET /health HTTP/1.1\r\nHost: rebound.example\r\n\r\n");
      const reply = await readReply(conn, 10_000, (t) => t.includes('{"route":true}'));
      assert.equal(parseResponse(reply.text).status, 200);
    } finally {
      conn.close();
    }
    assert.deepEqual(reached, ["/health?verbose=1", "/health", "/health", "/health"]);

    // Pipelined behind a request the server is still answering, a probe waits its turn there.
    const pipe = await connect(server.addr.port);
    try {
      await send(
        pipe,
        "GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
      );
      const both = await readReply(pipe, 10_000, (t) => t.split("HTTP/1.1 ").length > 2);
      assert.ok(both.text.indexOf('{"route":true}') < both.text.lastIndexOf("HTTP/1.1 "));
    } finally {
      pipe.close();
    }
    assert.deepEqual(reached.slice(4), ["/other", "/health"]);
  } finally {
    await server.shutdown();
  }
});

Deno.test("health at the door: probes during eight ~1 MiB chat bodies all get 200, the bodies 400", async () => {
  const s = await startServer({ config: { maxBodyBytes: 1024 * 1024 } });
  try {
    const content = "lorem ipsum dolor sit amet ".repeat(40_000).slice(0, 1024 * 1024 - 1024);
    const body = JSON.stringify({
      model: MODEL_ID,
      messages: [{ role: "user", content }],
      max_tokens: 1,
    });
    let sending = true;
    const probes: number[] = [];
    const polling = (async () => {
      while (sending) {
        const res = await fetch(s.url + "/health");
        probes.push(res.status);
        await res.body?.cancel();
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const answers = await Promise.all(Array.from({ length: 8 }, async () => {
      const res = await s.post("/v1/chat/completions", body);
      return [res.status, (await res.json()).error.code];
    }));
    sending = false;
    await polling;
    assert.deepEqual(answers, Array(8).fill([400, "context_length_exceeded"]));
    assert.ok(probes.length > 0 && probes.every((p) => p === 200), `${probes}`);
    // Probes are not API traffic: the route would not count them either, and the door does not.
    const m = await s.scrape();
    const total = [...m.get("sluice_requests_total") ?? []].reduce((n, x) => n + x.value, 0);
    assert.equal(total, 8);
  } finally {
    await s.close();
  }
});
