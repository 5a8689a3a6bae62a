// Builds OpenAI logprob objects (chat and legacy completions formats) from token events.
//
// The legacy completions format keys each step's top_logprobs by the token's text, so ids that
// decode alike collide and all but one of them are lost: byte-level tokenizers decode every
// lone byte of a multi-byte character to "\uFFFD", and `logprobs: 20` came back with 13-19
// keys. vLLM's `return_tokens_as_token_ids` names each token "token_id:N" instead (in both
// formats), which a client can map back through /detokenize; with it every step has all K keys.

import type { TokenEvent } from "../../runtime/service.ts";

/** How logprob entries name a token, and the text it stands for in the response. */
export interface TokenNames {
  /** The `token` field, and the key of a legacy top_logprobs entry. */
  name(id: number): string;
  /** The token's decoded text: its `bytes`, and the advance of the legacy `text_offset`. */
  text(id: number): string;
}

/** Tokens named by their decoded text (OpenAI's format), or as "token_id:N" (vLLM's option). */
export function tokenNames(decode: (id: number) => string, asTokenIds: boolean): TokenNames {
  return { name: asTokenIds ? (id) => `token_id:${id}` : decode, text: decode };
}

/** One token's logprob entry for the chat format. */
export interface ChatLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

/** Logprobs of one completion chunk in the legacy completions format. */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Record<string, number>[] | null;
  text_offset: number[];
}

const utf8 = new TextEncoder();

export function chatLogprobs(names: TokenNames, tokens: TokenEvent[]): ChatLogprob[] {
  const entry = (id: number) => ({
    token: names.name(id),
    bytes: [...utf8.encode(names.text(id))],
  });
  return tokens.map((ev) => ({
    ...entry(ev.id),
    logprob: ev.logprob,
    top_logprobs: ev.top.map(([id, logprob]) => ({ ...entry(id), logprob })),
  }));
}

export function completionLogprobs(
  names: TokenNames,
  tokens: TokenEvent[],
  textOffset: number,
): CompletionLogprobs {
  const out: CompletionLogprobs = {
    tokens: [],
    token_logprobs: [],
    top_logprobs: [],
    text_offset: [],
  };
  let offset = textOffset;
  for (const ev of tokens) {
    out.tokens.push(names.name(ev.id));
    out.token_logprobs.push(ev.logprob);
    // Keyed by name: with text names, ids that decode alike keep only the last one's logprob.
    out.top_logprobs!.push(Object.fromEntries(ev.top.map(([id, lp]) => [names.name(id), lp])));
    out.text_offset.push(offset);
    offset += names.text(ev.id).length;
  }
  return out;
}
