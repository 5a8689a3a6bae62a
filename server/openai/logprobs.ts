// Builds OpenAI logprob objects (chat and legacy completions formats) from token events.

import type { TokenEvent } from "../../runtime/service.ts";

/** The text of one token id, as the client sees it in logprob entries. */
export type TokenText = (id: number) => string;

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

export function chatLogprobs(tokenText: TokenText, tokens: TokenEvent[]): ChatLogprob[] {
  return tokens.map((ev) => {
    const token = tokenText(ev.id);
    return {
      token,
      logprob: ev.logprob,
      bytes: [...utf8.encode(token)],
      top_logprobs: ev.top.map(([id, logprob]) => {
        const t = tokenText(id);
        return { token: t, logprob, bytes: [...utf8.encode(t)] };
      }),
    };
  });
}

export function completionLogprobs(
  tokenText: TokenText,
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
    const token = tokenText(ev.id);
    out.tokens.push(token);
    out.token_logprobs.push(ev.logprob);
    out.top_logprobs!.push(Object.fromEntries(ev.top.map(([id, lp]) => [tokenText(id), lp])));
    out.text_offset.push(offset);
    offset += token.length;
  }
  return out;
}
