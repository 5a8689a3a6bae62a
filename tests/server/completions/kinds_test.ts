// A chat the model's template cannot render (no template, or one that rejects the messages) is
// the request's fault: 400 naming `messages`, not a 500.

import { ChatTemplateError, type Tokenizer } from "../../../runtime/service.ts";
import { chatPromptIds } from "../../../server/completions/kinds.ts";
import { ApiError } from "../../../server/openai/errors.ts";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";

Deno.test("chat: a template error is a 400 on messages", () => {
  const tok = {
    encodeChat: () => {
      throw new ChatTemplateError("this model has no chat template");
    },
  } as unknown as Tokenizer;
  assertThrows(
    () => chatPromptIds(tok, [{ role: "user", content: "hi" }]),
    (err: unknown) => {
      assert(err instanceof ApiError);
      assertEquals([err.status, err.param], [400, "messages"]);
      assert(err.message.includes("no chat template"));
      return true;
    },
  );
});

Deno.test("chat: other tokenizer failures are not dressed up as the client's fault", () => {
  const tok = {
    encodeChat: () => {
      throw new TypeError("broken tokenizer");
    },
  } as unknown as Tokenizer;
  assertThrows(() => chatPromptIds(tok, [{ role: "user", content: "hi" }]), TypeError);
});
