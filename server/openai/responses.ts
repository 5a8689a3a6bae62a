// OpenAI's response envelopes: a whole completion, a streamed chunk, the usage chunk. What goes
// inside a choice differs by endpoint (completions/kinds.ts); the envelope around it does not.

/** How a complete response ended. Cut or failed responses end with an error instead. */
export type FinishReason = "stop" | "length";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export function usage(prompt: number, completion: number): Usage {
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
  };
}

/** What every response and chunk of one request repeats. */
export interface ResponseMeta {
  id: string;
  /** Unix seconds. */
  created: number;
  model: string;
}

/** A response or chunk object: `choices` already built, plus fields such as `usage`. */
export function envelope(
  meta: ResponseMeta,
  object: string,
  choices: object[],
  extra: Record<string, unknown> = {},
) {
  const { id, created, model } = meta;
  return { id, object, created, model, system_fingerprint: "sluice", choices, ...extra };
}
