// A prompt to encode, as the endpoints give it: text, or chat messages for the model's template.
// One function encodes it, on whichever thread holds the tokenizer, so both threads give the same
// ids (prompt_encoder.ts picks the thread).

import type { ChatMessage, ChatTools, Tokenizer } from "./tokenizer.ts";

export type Prompt =
  /** `addSpecialTokens` (default true): what the tokenizer puts around a sequence (Llama's BOS). */
  | { text: string; addSpecialTokens?: boolean }
  /** `tools`: the template's `tools` variable (function definitions), when the request has any. */
  | { messages: ChatMessage[]; addGenerationPrompt?: boolean; tools?: ChatTools };

export function encodePrompt(tok: Tokenizer, prompt: Prompt): number[] {
  if ("text" in prompt) {
    return tok.encode(prompt.text, { addSpecialTokens: prompt.addSpecialTokens ?? true });
  }
  return tok.encodeChat(prompt.messages, chatOptions(prompt));
}

/** How the template renders a chat prompt (the encoder's length bound renders it the same). */
export function chatOptions(prompt: Extract<Prompt, { messages: unknown }>) {
  return { addGenerationPrompt: prompt.addGenerationPrompt ?? true, tools: prompt.tools };
}

/** Its text's length in UTF-16 code units: tokenizing costs about as much per unit. */
export function promptLength(prompt: Prompt): number {
  if ("text" in prompt) return prompt.text.length;
  // Tool calls and definitions are rendered as JSON: counted by their JSON's length.
  const json = (v: unknown) => v === undefined ? 0 : JSON.stringify(v).length;
  return prompt.messages.reduce((n, m) => n + m.content.length + json(m.tool_calls), 0) +
    json(prompt.tools);
}
