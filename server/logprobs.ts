// Builds OpenAI logprob objects (chat and legacy completions formats) from token events.

import type { TokenEvent } from "../runtime/service.ts";
import type { ChatLogprob, CompletionLogprobs } from "./openai.ts";
import type { TextStream } from "./text_stream.ts";

const utf8 = new TextEncoder();

export function chatLogprobs(text: TextStream, tokens: TokenEvent[]): ChatLogprob[] {
  return tokens.map((ev) => {
    const token = text.tokenText(ev.id);
    return {
      token,
      logprob: ev.logprob,
      bytes: [...utf8.encode(token)],
      top_logprobs: ev.top.map(([id, logprob]) => {
        const t = text.tokenText(id);
        return { token: t, logprob, bytes: [...utf8.encode(t)] };
      }),
    };
  });
}

export function completionLogprobs(
  text: TextStream,
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
    const token = text.tokenText(ev.id);
    out.tokens.push(token);
    out.token_logprobs.push(ev.logprob);
    out.top_logprobs!.push(Object.fromEntries(ev.top.map(([id, lp]) => [text.tokenText(id), lp])));
    out.text_offset.push(offset);
    offset += token.length;
  }
  return out;
}
