// What differs between /v1/chat/completions and /v1/completions, as one object per endpoint: its
// token limit and its logprobs; for completions also how the body gives its prompt and how text
// fits in a choice (chat's are agent/chat_prompt.ts and agent/chat_wire.ts). Everything else
// (sampling, pacing, SLOs, stop strings, errors) is shared.

import type { z } from "zod";
import {
  ChatTemplateError,
  type Prompt,
  type PromptEncoder,
  type TokenEvent,
  TokenizerClosed,
} from "../../runtime/service.ts";
import { ApiError, shuttingDown } from "../openai/errors.ts";
import { completionLogprobs, type TokenNames } from "../openai/logprobs.ts";
import { ChatRequest, CompletionRequest, type SharedFields } from "../openai/schemas.ts";

/** Text for the client with the tokens it completes; `offset`: where it starts in the response. */
export interface Piece {
  text: string;
  tokens: TokenEvent[];
  offset: number;
}

/** How an endpoint's answers look on the wire (the response writer reads only this). */
export interface WireFormat {
  idPrefix: string;
  /** `object` of a whole response, and of a streamed chunk. */
  object: string;
  chunkObject: string;
  /** A choice's fields (all but index and finish_reason) for a streamed piece of text. */
  chunkChoice(piece: Piece, names: TokenNames | null): object;
  /** The fields of a first chunk sent before any token, when the format has one. */
  openingChoice: object | null;
  /** The fields of the chunk that carries the finish reason. */
  finalChoice: object;
  /** The fields of the one choice of a whole (non-streamed) response. */
  wholeChoice(piece: Piece, names: TokenNames | null): object;
}

/** An endpoint's body: what it says to run (the request builder's submitParams reads this). */
export interface Kind<B extends SharedFields> {
  schema: z.ZodType<B>;
  /** The body field the runtime's prompt errors point at. */
  promptParam: string;
  /** Its responses' id prefix. */
  idPrefix: string;
  maxTokens(body: B): number | undefined;
  /** max_tokens when the body gives none; undefined: as many as the context allows. */
  defaultMaxTokens?: number;
  /** Top logprobs asked per token; null: no logprobs at all. */
  logprobs(body: B): number | null;
}

/**
 * An endpoint answered by the text response writer (/v1/completions): its body, its prompt, its
 * wire format. Chat is answered from assistant events instead (agent/chat_run.ts,
 * agent/chat_wire.ts).
 */
export interface Endpoint<B extends SharedFields> extends Kind<B>, WireFormat {
  /** The ids the body runs; `checkLength` as in promptIds. */
  promptIds(body: B, prompts: PromptEncoder, checkLength?: CheckLength): Promise<number[]>;
}

/** Given a lower bound on a prompt's token count; throws to refuse it. */
export type CheckLength = (atLeast: number) => void;

/**
 * The ids a prompt runs (/tokenize counts the same), large ones encoded off this thread.
 * `checkLength` is given a lower bound on a large prompt's count before it is tokenized.
 */
export async function promptIds(
  prompts: PromptEncoder,
  prompt: Prompt,
  checkLength?: CheckLength,
): Promise<number[]> {
  try {
    return await prompts.encode(prompt, { checkLength });
  } catch (err) {
    // No chat template, or one that rejects these messages: the request's fault, not the server's.
    if (err instanceof ChatTemplateError) {
      throw new ApiError(400, err.message, "messages", "chat_template_error");
    }
    if (err instanceof TokenizerClosed) throw shuttingDown();
    throw err;
  }
}

export const chat: Kind<ChatRequest> = {
  schema: ChatRequest,
  promptParam: "messages",
  idPrefix: "chatcmpl-",
  maxTokens: (body) => body.max_completion_tokens ?? body.max_tokens ?? undefined,
  logprobs: (body) => body.logprobs ? body.top_logprobs ?? 0 : null,
};

export const completion: Endpoint<CompletionRequest> = {
  schema: CompletionRequest,
  promptParam: "prompt",
  idPrefix: "cmpl-",
  object: "text_completion",
  chunkObject: "text_completion",
  promptIds: async (body, prompts, checkLength) => {
    const one = Array.isArray(body.prompt) ? body.prompt[0] : body.prompt;
    if (typeof one === "string") return await promptIds(prompts, { text: one }, checkLength);
    return (Array.isArray(one) ? one : body.prompt) as number[];
  },
  maxTokens: (body) => body.max_tokens ?? undefined,
  defaultMaxTokens: 16, // OpenAI's default for completions
  logprobs: (body) => body.logprobs ?? null,
  chunkChoice: (piece, names) => ({
    text: piece.text,
    logprobs: names && completionLogprobs(names, piece.tokens, piece.offset),
    // An extension: lets clients count tokens exactly even while text is held back.
    token_ids: piece.tokens.map((t) => t.id),
  }),
  openingChoice: null,
  finalChoice: { text: "", logprobs: null },
  wholeChoice: (piece, names) => ({
    text: piece.text,
    logprobs: names && completionLogprobs(names, piece.tokens, 0),
  }),
};
