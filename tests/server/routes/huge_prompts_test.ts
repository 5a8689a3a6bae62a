// Huge prompts never hold the thread that serves HTTP (issue 17, defect 3): one just under the
// body limit that cannot fit the context is refused with the context-length 400 before anything
// is tokenized; a large one is tokenized by the tokenizer's Worker, never on this thread; and
// /health answers while the Worker is busy with a megabyte.

import { Tokenizer } from "../../../engine/text/tokenizer.ts";
import { assert, assertEquals, assertMatch } from "../../helpers/testing.ts";
import { MODEL_ID, startServer, type TestServer, waitFor } from "../harness.ts";

const MIB = 1024 * 1024;

/** Counts this thread's calls of the tokenizer's encoders until restored. */
function spyOnEncoding() {
  const proto = Tokenizer.prototype;
  const { encode, encodeChat } = proto;
  const calls = { encode: 0, encodeChat: 0 };
  proto.encode = function (...args) {
    calls.encode++;
    return encode.apply(this, args);
  };
  proto.encodeChat = function (...args) {
    calls.encodeChat++;
    return encodeChat.apply(this, args);
  };
  return {
    calls,
    [Symbol.dispose]() {
      proto.encode = encode;
      proto.encodeChat = encodeChat;
    },
  };
}

/** Prose of `bytes` bytes (ASCII). */
function prose(bytes: number): string {
  return "The river was quiet in the morning, and the sluice gates held. ".repeat(
    Math.ceil(bytes / 64),
  ).slice(0, bytes);
}

function model(s: TestServer) {
  return s.model;
}

async function error(res: Response, status: number) {
  const body = await res.json();
  assertEquals(res.status, status, JSON.stringify(body).slice(0, 300));
  return body.error;
}

Deno.test("huge prompts: one that cannot fit is refused before any tokenizing", async () => {
  const s = await startServer({ config: { maxBodyBytes: MIB } });
  try {
    const context = s.runtime.info.maxContext;
    // The exact refusal, of ids the runtime counts: the early one has its shape.
    const exact = await error(
      await s.post("/v1/completions", { model: MODEL_ID, prompt: new Array(context).fill(65) }),
      400,
    );
    assertMatch(exact.message, /^The prompt is \d+ tokens; this model's context is \d+ tokens$/);

    const text = prose(MIB - 1024); // the body is just under the limit
    const messages = [{ role: "user", content: text }];
    using spy = spyOnEncoding();
    for (
      const [path, body, param] of [
        ["/v1/completions", { model: MODEL_ID, prompt: text }, "prompt"],
        ["/v1/chat/completions", { model: MODEL_ID, messages }, "messages"],
      ] as const
    ) {
      const e = await error(await s.post(path, body), 400);
      assertEquals([e.type, e.code, e.param], [exact.type, exact.code, param]);
      assertMatch(
        e.message,
        new RegExp(
          `^The prompt is at least \\d+ tokens; this model's context is ${context} tokens$`,
        ),
      );
    }
    assertEquals(spy.calls, { encode: 0, encodeChat: 0 }, "nothing tokenized on this thread");
    assertEquals(model(s).prompts.offThread.sent, 0, "nor on the tokenizer's Worker");
  } finally {
    await s.close();
  }
});

Deno.test("huge prompts: a large prompt is tokenized by the Worker, not this thread", async () => {
  // Prompts of 1 KiB or more go to the Worker, so that one can still fit the tiny model's context.
  const s = await startServer({ config: { maxBodyBytes: MIB }, prompts: { offThreadChars: 1024 } });
  try {
    const { tokenizer, prompts } = model(s);
    const text = prose(2048);
    const messages = [{ role: "user", content: text }];
    const textIds = tokenizer.encode(text);
    const chatIds = tokenizer.encodeChat(messages);
    assert(chatIds.length < s.runtime.info.maxContext);

    using spy = spyOnEncoding();
    const completion = await s.post("/v1/completions", {
      model: MODEL_ID,
      prompt: text,
      max_tokens: 1,
    });
    assertEquals(completion.status, 200);
    assertEquals((await completion.json()).usage.prompt_tokens, textIds.length);
    const chat = await s.post("/v1/chat/completions", { model: MODEL_ID, messages, max_tokens: 1 });
    assertEquals(chat.status, 200);
    assertEquals((await chat.json()).usage.prompt_tokens, chatIds.length);
    for (const [body, ids] of [[{ prompt: text }, textIds], [{ messages }, chatIds]] as const) {
      const res = await s.post("/tokenize", body);
      assertEquals((await res.json()).tokens, ids);
    }
    assertEquals(spy.calls, { encode: 0, encodeChat: 0 });
    assertEquals(prompts.offThread.sent, 4);

    // Past the context, though the bound could not tell: counted off the thread, refused exactly.
    const long = prose(16 * 1024);
    const e = await error(await s.post("/v1/completions", { model: MODEL_ID, prompt: long }), 400);
    assertEquals([e.code, e.param], ["context_length_exceeded", "prompt"]);
    assertMatch(e.message, /^The prompt is \d+ tokens;/);
    assertEquals(spy.calls, { encode: 0, encodeChat: 0 });
    assertEquals(prompts.offThread.sent, 5);
  } finally {
    await s.close();
  }
});

Deno.test("huge prompts: /health answers while a megabyte is being tokenized", async () => {
  const s = await startServer({ config: { maxBodyBytes: 2 * MIB } });
  try {
    using spy = spyOnEncoding();
    // /tokenize counts any prompt, however long: here a megabyte, on the Worker (~a second).
    let tokenized = false;
    const big = s.post("/tokenize", { prompt: prose(MIB) }).then(async (res) => {
      tokenized = true;
      return { status: res.status, count: (await res.json()).count };
    });
    // Once the tokenizing has begun (on this thread, it would hold the wait below until it ends).
    await waitFor(
      () => spy.calls.encode > 0 || model(s).prompts.offThread.pending > 0,
      "the megabyte's tokenizing to begin",
    );
    const health = await fetch(`${s.url}/health`);
    assertEquals([health.status, await health.json()], [200, { status: "ready" }]);
    assertEquals(tokenized, false, "/health answered before the megabyte's tokens");
    const { status, count } = await big;
    assertEquals(status, 200);
    assert(count > 0);
    assertEquals(spy.calls.encode, 0);
  } finally {
    await s.close();
  }
});
