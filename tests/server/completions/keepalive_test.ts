// SSE keep-alive (issue 20): a stream with nothing to send for `sseKeepAliveMs` sends a comment
// line, whole, between events; clients that parse SSE (the official one) skip it.

import { MODEL_ID, sseEvents, startServer } from "../harness.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

Deno.test("sse keep-alive: a stream paced slower than the interval carries comment lines between whole events, and the official client reads it unchanged", async () => {
  const s = await startServer({ config: { sseKeepAliveMs: 60 } });
  try {
    const body = {
      model: MODEL_ID,
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 3,
      temperature: 0, // the same text both times, so the same chunks
      stream: true,
      reading_rate: 4, // a token every 250 ms: several intervals of silence between them
    };
    const res = await s.post("/v1/chat/completions", body);
    const text = await res.text();
    const comments = text.split("\n\n").filter((e) => e === ": keep-alive");
    assert(comments.length >= 2, `expected keep-alive comments, got ${comments.length}`);
    const events = sseEvents(text);
    assertEquals(events.at(-1), "[DONE]");
    for (const e of events.slice(0, -1)) JSON.parse(e);

    // The official client, same request: the same three tokens' chunks, no error on comments.
    const stream = await s.client.chat.completions.create(
      body as unknown as Parameters<typeof s.client.chat.completions.create>[0] & { stream: true },
    );
    let chunks = 0;
    for await (const _ of stream) chunks++;
    assertEquals(chunks, events.length - 1);
  } finally {
    await s.close();
  }
});

Deno.test("sse keep-alive: a stream that never falls silent sends none", async () => {
  const s = await startServer({ config: { sseKeepAliveMs: 60_000 } });
  try {
    const res = await s.post("/v1/chat/completions", {
      model: MODEL_ID,
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
      stream: true,
    });
    const text = await res.text();
    assert(!text.includes(": keep-alive"));
    assertEquals(sseEvents(text).at(-1), "[DONE]");
  } finally {
    await s.close();
  }
});
