// A prompt to encode, as the endpoints give it: text, or chat messages for the model's template.
// One function encodes it, on whichever thread holds the tokenizer, so both threads give the same
// ids (prompt_encoder.ts picks the thread).

import type { ChatMessage, Tokenizer } from "./tokenizer.ts";

export type Prompt =
  /** `addSpecialTokens` (default true): what the tokenizer puts around a sequence (Llama's BOS). */
  | { text: string; addSpecialTokens?: boolean }
  | { messages: ChatMessage[]; addGenerationPrompt?: boolean };

export function encodePrompt(tok: Tokenizer, prompt: Prompt): number[] {
  if ("text" in prompt) {
    return tok.encode(prompt.text, { addSpecialTokens: prompt.addSpecialTokens ?? true });
  }
  return tok.encodeChat(prompt.messages, {
    addGenerationPrompt: prompt.addGenerationPrompt ?? true,
  });
}

/** Its text's length in UTF-16 code units: tokenizing costs about as much per unit. */
export function promptLength(prompt: Prompt): number {
  if ("text" in prompt) return prompt.text.length;
  return prompt.messages.reduce((n, m) => n + m.content.length, 0);
}
