// The tokenizer's Worker: the same tokenizer as the main thread's, built from the same files (sent
// once, as JSON), encoding the prompts it is sent one at a time, in order. A prompt the tokenizer
// refuses comes back as a failure; anything else thrown (a bad load) ends the Worker, and the
// thread's client sees it as an error event.

/// <reference lib="deno.worker" />

import { encodePrompt } from "./prompt.ts";
import { ChatTemplateError, Tokenizer } from "./tokenizer.ts";
import type { FromTokenizer, ToTokenizer } from "./tokenizer_protocol.ts";

let tokenizer: Tokenizer | null = null;

const post = (msg: FromTokenizer, transfer: Transferable[] = []) => self.postMessage(msg, transfer);

self.onmessage = (event: MessageEvent<ToTokenizer>) => {
  const msg = event.data;
  if (msg.type === "load") {
    tokenizer = new Tokenizer(JSON.parse(new TextDecoder().decode(msg.files)));
    return;
  }
  try {
    const ids = Uint32Array.from(encodePrompt(tokenizer!, msg.prompt));
    post({ type: "ids", id: msg.id, ids }, [ids.buffer]);
  } catch (err) {
    post({
      type: "failed",
      id: msg.id,
      message: err instanceof Error ? err.message : String(err),
      chatTemplate: err instanceof ChatTemplateError,
    });
  }
};
