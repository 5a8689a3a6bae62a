// `num_ctx`: the context a request may use, within the model's. Past the model's context it is a
// 400 (Ollama would silently cap it); within it, the prompt must fit (Sluice refuses rather than
// truncating, as on /v1) and the answer stops at the limit with done_reason "length".

import { badField } from "./errors.ts";

/** The max_tokens that keeps prompt + answer within num_ctx (undefined: no limit of its own). */
export function limitToContext(
  numCtx: number | undefined,
  maxContext: number,
  promptTokens: number,
  maxTokens: number | undefined,
): number | undefined {
  if (numCtx === undefined) return maxTokens;
  if (numCtx > maxContext) {
    throw badField(
      "options.num_ctx",
      `${numCtx} is past the model's context (${maxContext} tokens)`,
    );
  }
  const room = numCtx - promptTokens;
  if (room < 1) {
    throw badField(
      "options.num_ctx",
      `the prompt (${promptTokens} tokens) leaves no room for an answer in ${numCtx} tokens`,
    );
  }
  return Math.min(maxTokens ?? room, room);
}
