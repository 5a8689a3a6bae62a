// Request priorities over HTTP: the `priority` body field (vLLM's: lower first, default 0; here
// -100..100) and POST /v1/requests/{id}/priority, which changes a running request's priority by
// its response id: 404 for an unknown or finished one, 400 for a bad body, 405 for other methods.

import type { StepEngine } from "../../../engine/engine.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { MODEL_ID, SseReader, startServer, type TestServer } from "../harness.ts";

/** Each step waits 20 ms first, so a stream of 60 tokens runs for over a second. */
function slowed(engine: StepEngine): StepEngine {
  return {
    info: engine.info,
    step: (plan) => new Promise((r) => setTimeout(r, 20)).then(() => engine.step(plan)),
    copyStats: engine.copyStats?.bind(engine),
    close: () => engine.close(),
  };
}

const setPriority = (s: TestServer, id: string, body: unknown, init: RequestInit = {}) =>
  s.post(`/v1/requests/${encodeURIComponent(id)}/priority`, body, init);

async function errorOf(res: Response) {
  return (await res.json()).error;
}

/** Starts a long stream and reads its first chunk; returns its id and reader. */
async function startStream(s: TestServer, path: string, body: Record<string, unknown>) {
  const res = await s.post(path, {
    model: MODEL_ID,
    stream: true,
    max_tokens: 60,
    temperature: 0,
    ignore_eos: true,
    ...body,
  });
  assertEquals(res.status, 200);
  const header = res.headers.get("sluice-request-id");
  const reader = new SseReader(res);
  const first = JSON.parse((await reader.next())!);
  assertEquals(header, first.id, "the header names the response's id");
  return { id: first.id as string, reader };
}

const priorityOf = (s: TestServer, runtimeId: number) =>
  s.runtime.stats().requests.find((r) => r.id === runtimeId)?.priority;

Deno.test("priority: set at creation, changed while running, gone once finished", async (t) => {
  const s = await startServer({ wrapEngine: slowed });
  try {
    await t.step(
      "the body's priority reaches the request; a change applies while it runs",
      async () => {
        const { id, reader } = await startStream(s, "/v1/chat/completions", {
          messages: [{ role: "user", content: "hi" }],
          priority: -7,
        });
        assert(id.startsWith("chatcmpl-"));
        const [live] = s.runtime.stats().requests.filter((r) => r.state !== "finished");
        assertEquals(live.priority, -7);
        const res = await setPriority(s, id, { priority: 12 });
        assertEquals(res.status, 200);
        assertEquals(await res.json(), { id, object: "sluice.request", priority: 12 });
        assertEquals(priorityOf(s, live.id), 12);
        // Read to the end: then the id is gone.
        const rest = await reader.rest();
        assertEquals(rest.at(-1), "[DONE]");
        const gone = await setPriority(s, id, { priority: 0 });
        assertEquals(gone.status, 404);
        const err = await errorOf(gone);
        assertEquals([err.type, err.code, err.param], [
          "invalid_request_error",
          "request_not_found",
          "id",
        ]);
      },
    );

    await t.step("completions: a stream's id from its header, before any token", async () => {
      const res = await s.post("/v1/completions", {
        model: MODEL_ID,
        prompt: [5, 6, 7],
        stream: true,
        max_tokens: 60,
        ignore_eos: true,
      });
      const id = res.headers.get("sluice-request-id")!;
      assert(id.startsWith("cmpl-"));
      assertEquals((await setPriority(s, id, { priority: 3 })).status, 200);
      await res.body!.cancel(); // the client goes away: the request ends, and its id with it
      let status = 200;
      for (let i = 0; i < 200 && status === 200; i++) {
        await new Promise((r) => setTimeout(r, 10));
        status = (await setPriority(s, id, { priority: 4 })).status;
      }
      assertEquals(status, 404);
    });

    await t.step("bad bodies are 400s naming the field; other media types 415", async () => {
      const { id, reader } = await startStream(s, "/v1/completions", { prompt: [1, 2] });
      for (
        const body of [{ priority: 1.5 }, { priority: 101 }, { priority: -101 }, {}, {
          priority: "1",
        }]
      ) {
        const res = await setPriority(s, id, body);
        assertEquals(res.status, 400, JSON.stringify(body));
        const err = await errorOf(res);
        assertEquals([err.param, err.code], ["priority", "invalid_value"]);
      }
      assertEquals((await setPriority(s, id, "{")).status, 400);
      const text = await setPriority(s, id, { priority: 1 }, {
        headers: { "content-type": "text/plain" },
      });
      assertEquals(text.status, 415);
      await text.body?.cancel();
      await reader.cancel();
    });

    await t.step("unknown ids are 404s; other methods 405", async () => {
      const res = await setPriority(s, "chatcmpl-nope", { priority: 1 });
      assertEquals(res.status, 404);
      assertEquals((await errorOf(res)).code, "request_not_found");
      const get = await fetch(`${s.url}/v1/requests/chatcmpl-nope/priority`);
      assertEquals(get.status, 405);
      await get.body?.cancel();
    });

    await t.step("a priority out of bounds on creation is a 400", async () => {
      for (const path of ["/v1/chat/completions", "/v1/completions"]) {
        const res = await s.post(path, {
          model: MODEL_ID,
          messages: [{ role: "user", content: "hi" }],
          prompt: "hi",
          priority: 1000,
        });
        assertEquals(res.status, 400);
        assertEquals((await errorOf(res)).param, "priority");
      }
    });
  } finally {
    await s.close();
  }
});
