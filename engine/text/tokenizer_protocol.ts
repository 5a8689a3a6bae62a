// The messages between the tokenizer's thread (tokenizer_thread.ts) and its Worker
// (tokenizer_worker.ts).

import type { Prompt } from "./prompt.ts";

export type ToTokenizer =
  /** The TokenizerFiles as UTF-8 JSON: first, once. */
  | { type: "load"; files: Uint8Array }
  | { type: "encode"; id: number; prompt: Prompt };

export type FromTokenizer =
  | { type: "ids"; id: number; ids: Uint32Array }
  /** `chatTemplate`: the tokenizer threw ChatTemplateError. */
  | { type: "failed"; id: number; message: string; chatTemplate: boolean };
