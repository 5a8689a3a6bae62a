// How an Ollama answer ends, without a model: pieces then the last object with its counts, or,
// when the reply fails after its stream began, an {"error"} line and nothing after it; sent whole,
// the failure is the error's own status.

import { type Context, Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { ServerMetrics } from "../../../server/metrics/server_metrics.ts";
import { ApiError } from "../../../server/openai/errors.ts";
import { ollamaError } from "../../../server/ollama/errors.ts";
import type { Delta, Reply } from "../../../server/ollama/reply.ts";
import { respondOllama } from "../../../server/ollama/respond.ts";
import { generateWire } from "../../../server/ollama/wire.ts";

function reply(deltas: Delta[], failure?: ApiError): Reply {
  return {
    id: "gen-1",
    promptTokens: 4,
    deltas: (async function* () {
      yield* deltas;
    })(),
    end: () =>
      failure
        ? Promise.reject(failure)
        : Promise.resolve({ doneReason: "stop", evalCount: deltas.length, context: [1, 2] }),
  };
}

function app(made: () => Reply, stream: boolean) {
  const metrics = new ServerMetrics("m");
  // As app.ts answers under /api: the error's status, Ollama's shape.
  const answer = (err: Error, c: Context) => {
    const e = err as ApiError;
    return c.json(ollamaError(e), e.status as ContentfulStatusCode);
  };
  return new Hono().onError(answer).post("/", (c) =>
    respondOllama(c, {
      reply: made(),
      wire: generateWire("m:latest"),
      stream,
      abort: new AbortController(),
      observer: metrics.requestStarted(),
    }));
}

const pieces = [{ content: "Hel" }, { thinking: "hmm" }, { content: "lo" }];

Deno.test("ollama respond: pieces, then the last object with the counts", async () => {
  const res = await app(() => reply(pieces), true).request("/", { method: "POST" });
  assertEquals(res.headers.get("content-type"), "application/x-ndjson");
  assertEquals(res.headers.get("sluice-request-id"), "gen-1");
  const objects = (await res.text()).trimEnd().split("\n").map((l) => JSON.parse(l));
  assertEquals(objects.map((o) => o.response), ["Hel", "", "lo", ""]);
  assertEquals(objects[1].thinking, "hmm");
  const last = objects.at(-1);
  assertEquals([last.done, last.done_reason, last.eval_count], [true, "stop", 3]);
  assertEquals([last.prompt_eval_count, last.context], [4, [1, 2]]);

  const whole = await app(() => reply(pieces), false).request("/", { method: "POST" });
  const body = await whole.json();
  assertEquals([body.response, body.thinking, body.done], ["Hello", "hmm", true]);
});

Deno.test("ollama respond: a failure mid-stream is the last line; whole, its status", async () => {
  const failure = new ApiError(503, "The server shut down before the response was complete");
  const res = await app(() => reply(pieces, failure), true).request("/", { method: "POST" });
  assertEquals(res.status, 200, "the stream had begun");
  const objects = (await res.text()).trimEnd().split("\n").map((l) => JSON.parse(l));
  assertEquals(objects.at(-1), { error: failure.message });
  assert(objects.slice(0, -1).every((o) => o.done === false), "no object claims it is done");

  const whole = await app(() => reply(pieces, failure), false).request("/", { method: "POST" });
  assertEquals(whole.status, 503);
  assertEquals(await whole.json(), { error: failure.message });
});
