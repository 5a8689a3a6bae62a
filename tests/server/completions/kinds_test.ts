// A chat the model's template cannot render (no template, or one that rejects the messages) is
// the request's fault: 400 naming `messages`, not a 500, whichever thread encoded it. A prompt
// whose tokenizer closed under it (a shutdown) is a 503.

import {
  ChatTemplateError,
  type PromptEncoder,
  TokenizerClosed,
} from "../../../runtime/service.ts";
import { promptIds } from "../../../server/completions/kinds.ts";
import { chatPrompt } from "../../../server/agent/chat_prompt.ts";
import { ApiError } from "../../../server/openai/errors.ts";
import { assert, assertEquals, assertRejects } from "../../helpers/testing.ts";

/** A prompt encoder that fails as `fail` does. */
function failing(fail: () => never): PromptEncoder {
  return { encode: () => Promise.resolve().then(fail) } as unknown as PromptEncoder;
}

const hi = chatPrompt([{ role: "user", content: "hi" }], { format: "generic" });

Deno.test("chat: a template error is a 400 on messages", async () => {
  const prompts = failing(() => {
    throw new ChatTemplateError("this model has no chat template");
  });
  await assertRejects(promptIds(prompts, hi), (err: unknown) => {
    assert(err instanceof ApiError);
    assertEquals([err.status, err.param, err.code], [400, "messages", "chat_template_error"]);
    assert(err.message.includes("no chat template"));
    return true;
  });
});

Deno.test("chat: other tokenizer failures are not dressed up as the client's fault", async () => {
  const prompts = failing(() => {
    throw new TypeError("broken tokenizer");
  });
  await assertRejects(promptIds(prompts, hi), TypeError);
});

Deno.test("prompt: a tokenizer closed by a shutdown is a 503", async () => {
  const prompts = failing(() => {
    throw new TokenizerClosed();
  });
  await assertRejects(promptIds(prompts, { text: "hi" }), (err: unknown) => {
    assert(err instanceof ApiError);
    assertEquals([err.status, err.code], [503, "shutting_down"]);
    return true;
  });
});
