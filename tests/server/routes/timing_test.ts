// Sluice's `stream_options.include_timing` extension: streamed chunks that carry tokens get
// `sluice_timing` (when each token was generated, in ms since the request was received), only when
// asked; an ill-typed value is a 400 like any other field.

import { assert, assertEquals } from "../../helpers/testing.ts";
import { MODEL_ID, SseReader, startServer } from "../harness.ts";

interface Timed {
  chunk: any;
  /** ms from just before the request was sent until this chunk was read, on the server's clock. */
  readMs: number;
}

/** Streams a request, noting when each chunk was read (the server runs in this process). */
async function stream(
  post: (path: string, body: unknown) => Promise<Response>,
  path: string,
  body: Record<string, unknown>,
): Promise<Timed[]> {
  const t0 = performance.now();
  const res = await post(path, { model: MODEL_ID, stream: true, ...body });
  assertEquals(res.status, 200);
  const reader = new SseReader(res);
  const out: Timed[] = [];
  for (let d = await reader.next(); d !== null && d !== "[DONE]"; d = await reader.next()) {
    out.push({ chunk: JSON.parse(d), readMs: performance.now() - t0 });
  }
  return out;
}

Deno.test("include_timing: chunks carry sluice_timing only when asked", async (t) => {
  const s = await startServer();
  try {
    const common = { max_tokens: 12, temperature: 0, ignore_eos: true };
    await t.step(
      "completions: every token's time, in order, before its chunk was sent",
      async () => {
        // Paced at 40 tokens/s so tokens wait in the server's buffer between generation and send.
        const got = await stream(s.post, "/v1/completions", {
          ...common,
          prompt: [5, 6, 7],
          reading_rate: 40,
          stream_options: { include_usage: true, include_timing: true },
        });
        const withTokens = got.filter((g) => g.chunk.choices[0]?.token_ids?.length > 0);
        assertEquals(withTokens.reduce((n, g) => n + g.chunk.choices[0].token_ids.length, 0), 12);
        let last = 0;
        for (const { chunk, readMs } of withTokens) {
          const timing = chunk.sluice_timing;
          assertEquals(Object.keys(timing).sort(), ["generated_ms", "tokens_generated_ms"]);
          const each: number[] = timing.tokens_generated_ms;
          assertEquals(each.length, chunk.choices[0].token_ids.length);
          assertEquals(timing.generated_ms, each.at(-1));
          for (const ms of each) {
            assert(ms >= last, `generated_ms went back: ${ms} after ${last}`);
            last = ms;
          }
          assert(
            timing.generated_ms <= readMs,
            `token generated at ${timing.generated_ms} ms, its chunk read at ${readMs} ms`,
          );
        }
        // Chunks without tokens (the finish and usage chunks) have no timing.
        for (const { chunk } of got.filter((g) => !withTokens.includes(g))) {
          assertEquals(chunk.sluice_timing, undefined);
        }
        assertEquals(got.at(-1)!.chunk.usage.completion_tokens, 12);
      },
    );
    await t.step("chat: the opening chunk has none, token chunks have it", async () => {
      const got = await stream(s.post, "/v1/chat/completions", {
        ...common,
        messages: [{ role: "user", content: "hi" }],
        stream_options: { include_timing: true },
      });
      assertEquals(got[0].chunk.choices[0].delta.role, "assistant");
      assertEquals(got[0].chunk.sluice_timing, undefined);
      const timed = got.filter((g) => g.chunk.sluice_timing);
      assert(timed.length > 0, "some chunk has a timing");
      for (const g of timed) assert(g.chunk.sluice_timing.generated_ms <= g.readMs);
      assertEquals(got.at(-1)!.chunk.choices[0].finish_reason, "length");
      assertEquals(got.at(-1)!.chunk.sluice_timing, undefined);
    });
    for (
      const options of [undefined, { include_usage: true }, { include_timing: false }, {
        include_timing: null,
      }]
    ) {
      await t.step(`absent with stream_options ${JSON.stringify(options)}`, async () => {
        const got = await stream(s.post, "/v1/completions", {
          ...common,
          prompt: [5, 6, 7],
          ...(options ? { stream_options: options } : {}),
        });
        assert(got.length > 1);
        for (const { chunk } of got) assertEquals("sluice_timing" in chunk, false);
      });
    }
    await t.step("an include_timing that is not a boolean is a 400", async () => {
      for (const bad of ["yes", 1, {}]) {
        const res = await s.post("/v1/completions", {
          model: MODEL_ID,
          prompt: [5, 6, 7],
          stream: true,
          stream_options: { include_timing: bad },
        });
        assertEquals(res.status, 400, `include_timing ${JSON.stringify(bad)}`);
        const body = await res.json();
        assertEquals(body.error.type, "invalid_request_error");
        assertEquals(body.error.param, "stream_options.include_timing");
        assert(typeof body.error.message === "string" && body.error.message.length > 0);
      }
    });
  } finally {
    await s.close();
  }
});
