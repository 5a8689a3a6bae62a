// The front door (server/connections/front_door.ts) over a small handler: malformed framing gets
// OpenAI's envelope instead of Deno's bare 400, heads and idle keep-alive connections are timed
// out, connections past the cap get 503, requests (bodies, pipelining, streams) pass through
// unchanged, a client that goes away aborts its request, and nobody reaches the HTTP server
// except through the door.

import assert from "node:assert/strict";
import { FrontDoor, type FrontDoorOptions } from "../../../server/connections/front_door.ts";
import { connect, exchange, parseResponse, readReply, send } from "./raw_http.ts";

const aborted: string[] = [];

async function handler(req: Request): Promise<Response> {
  const url = new URL(req.url);
  if (url.pathname === "/echo") {
    return Response.json({ method: req.method, body: await req.text() });
  }
  if (url.pathname === "/stream") {
    // Ticks until the client goes away; records the abort so the test can see it.
    req.signal.addEventListener("abort", () => aborted.push("stream"));
    let n = 0;
    return new Response(
      new ReadableStream({
        async pull(c) {
          await new Promise((r) => setTimeout(r, 20));
          c.enqueue(new TextEncoder().encode(`data: ${n++}\n\n`));
        },
      }),
      { headers: { "content-type": "text/event-stream" } },
    );
  }
  return Response.json({ ok: true });
}

async function withDoor(
  options: Partial<FrontDoorOptions>,
  body: (door: FrontDoor, port: number) => Promise<void>,
): Promise<void> {
  const door = new FrontDoor(handler, {
    hostname: "127.0.0.1",
    port: 0,
    maxConnections: 64,
    headerTimeoutMs: 5000,
    keepAliveTimeoutMs: 5000,
    maxHeadBytes: 16 * 1024,
    ...options,
  });
  try {
    await body(door, door.addr.port);
  } finally {
    await door.shutdown();
  }
}

const GET = "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
const CLOSING_GET = "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
const isOk = (t: string) => t.includes('{"ok":true}');

Deno.test("malformed framing gets OpenAI's error envelope, not a bare 400", async () => {
  const cases: [string, string, number, string][] = [
    ["negative Content-Length", "Content-Length: -5\r\n", 400, "invalid_content_length"],
    [
      "duplicate Content-Length",
      "Content-Length: 2\r\nContent-Length: 2\r\n",
      400,
      "duplicate_content_length",
    ],
    ["listed Content-Length", "Content-Length: 2, 3\r\n", 400, "duplicate_content_length"],
    [
      "chunked and Content-Length",
      "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n",
      400,
      "ambiguous_framing",
    ],
    ["two Host headers", "Host: other\r\n", 400, "duplicate_host"],
    ["a gzip transfer coding", "Transfer-Encoding: gzip\r\n", 501, "unsupported_transfer_encoding"],
    ["oversized headers", `X-Big: ${"a".repeat(20_000)}\r\n`, 431, "request_headers_too_large"],
    ["too many header lines", "X-A: 1\r\n".repeat(120), 431, "request_headers_too_large"],
    ["space before a colon", "Bad : 1\r\n", 400, "malformed_header"],
  ];
  await withDoor({}, async (_, port) => {
    for (const [what, extra, status, code] of cases) {
      const reply = await exchange(
        port,
        `POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}\r\nhi`,
      );
      const res = parseResponse(reply.text);
      assert.equal(res.status, status, what);
      assert.equal(JSON.parse(res.body).error.code, code, what);
      assert.match(res.headers, /content-type: application\/json/, what);
      assert.ok(reply.closed, `${what}: the connection is closed after the error`);
    }
    const noHost = parseResponse((await exchange(port, "GET / HTTP/1.1\r\n\r\n")).text);
    assert.equal(JSON.parse(noHost.body).error.code, "missing_host");
    const badLine = parseResponse((await exchange(port, "HELLO\r\n\r\n")).text);
    assert.equal(badLine.status, 400);
    assert.equal(JSON.parse(badLine.body).error.code, "malformed_request");
  });
});

Deno.test("bodies by length and chunked, and pipelined requests, pass through", async () => {
  await withDoor({}, async (_, port) => {
    const conn = await connect(port);
    try {
      await send(
        conn,
        "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nhello" +
          "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n" +
          "3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n" +
          "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
      );
      const reply = await readReply(conn, 5000);
      assert.match(reply.text, /"body":"hello"/);
      assert.match(reply.text, /"body":"abcde"/);
      // The third head is checked too, though it came on a connection already in use.
      assert.match(reply.text, /duplicate_content_length/);
      assert.ok(reply.closed);
    } finally {
      conn.close();
    }
  });
});

Deno.test("a connection that sends no complete head in time is closed; a partial head gets 408", async () => {
  await withDoor({ headerTimeoutMs: 300 }, async (door, port) => {
    const silent = await connect(port);
    const partial = await connect(port);
    try {
      await send(partial, "GET /x HTTP/1.1\r\nHost: 127.0");
      const [a, b] = await Promise.all([readReply(silent, 5000), readReply(partial, 5000)]);
      assert.ok(a.closed, "the silent connection is closed");
      assert.equal(a.text, "");
      assert.ok(b.closed);
      const res = parseResponse(b.text);
      assert.equal(res.status, 408);
      assert.equal(JSON.parse(res.body).error.code, "request_timeout");
      silent.close();
      partial.close();
      const until = performance.now() + 5000;
      while (door.connections > 0 && performance.now() < until) {
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(door.connections, 0);
    } finally {
      for (const c of [silent, partial]) {
        try {
          c.close();
        } catch { /* closed */ }
      }
    }
  });
});

Deno.test("an idle keep-alive connection is closed after the keep-alive timeout", async () => {
  await withDoor({ keepAliveTimeoutMs: 300 }, async (_, port) => {
    const conn = await connect(port);
    try {
      await send(conn, GET);
      const first = await readReply(conn, 5000, (t) => t.includes('{"ok":true}'));
      assert.equal(parseResponse(first.text).status, 200);
      assert.match(parseResponse(first.text).headers, /keep-alive: timeout=0/);
      await send(conn, GET); // kept alive: a second request on it is served
      const second = await readReply(conn, 5000, (t) => t.includes('{"ok":true}'));
      assert.equal(parseResponse(second.text).status, 200);
      const idle = await readReply(conn, 5000);
      assert.ok(idle.closed, "closed once idle past the timeout");
    } finally {
      conn.close();
    }
  });
});

Deno.test("a long stream is not cut by the timeouts; its client going away aborts it", async () => {
  await withDoor({ headerTimeoutMs: 200, keepAliveTimeoutMs: 200 }, async (door, port) => {
    aborted.length = 0;
    const conn = await connect(port);
    await send(conn, "GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    // Well past both timeouts, the stream still flows.
    const reply = await readReply(conn, 800);
    assert.ok(!reply.closed);
    assert.match(reply.text, /data: 10\n/);
    conn.close();
    const until = performance.now() + 5000;
    while (aborted.length === 0 && performance.now() < until) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.deepEqual(aborted, ["stream"]);
    while (door.connections > 0 && performance.now() < until) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(door.connections, 0);
  });
});

Deno.test("at --max-connections, an unused connection makes room; with all in use, 503", async () => {
  const events: string[] = [];
  await withDoor({
    maxConnections: 2,
    onConnectionEvent: (e) => e.kind !== "opened" && events.push(`${e.kind}:${e.reason}`),
  }, async (_, port) => {
    const used = await connect(port);
    const unused = await connect(port);
    const extra: Deno.TcpConn[] = [];
    try {
      await send(used, GET);
      assert.equal(parseResponse((await readReply(used, 5000, isOk)).text).status, 200);
      // Full: the newcomer is admitted in place of the connection that never sent anything...
      const newcomer = await exchange(port, CLOSING_GET);
      assert.equal(parseResponse(newcomer.text).status, 200);
      assert.ok((await readReply(unused, 5000)).closed, "the unused connection was evicted");
      assert.deepEqual(events.splice(0), ["closed:evicted", "closed:server_closed"]);
      // ...and the kept-alive connection that had been used is still served.
      await send(used, GET);
      assert.equal(parseResponse((await readReply(used, 5000, isOk)).text).status, 200);

      // Both in use (one streaming): a newcomer gets 503, and the two are served throughout.
      extra.push(await connect(port));
      await send(extra[0], "GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
      await readReply(extra[0], 5000, (t) => t.includes("data: 1\n"));
      const refused = await exchange(port, GET);
      const res = parseResponse(refused.text);
      assert.equal(res.status, 503);
      assert.equal(JSON.parse(res.body).error.code, "server_busy");
      assert.deepEqual(events, ["refused:capacity"]);
      await send(used, GET);
      assert.equal(parseResponse((await readReply(used, 5000, isOk)).text).status, 200);
    } finally {
      for (const c of [used, unused, ...extra]) {
        try {
          c.close();
        } catch { /* closed */ }
      }
    }
  });
});
