// POST /tokenize and POST /detokenize, in vLLM's shapes: a client counts a prompt's tokens against
// the context (or builds a token-id prompt) with the server's own tokenizer and chat template, and
// turns the ids of `return_tokens_as_token_ids` logprobs back into text. Mounted at the root, as
// vLLM has them, behind the same API key, body limits and error envelope as /v1. A prompt is
// counted whatever its length (large ones off this thread), also one longer than the context.

import { Hono } from "hono";
import { chatPrompt } from "../agent/chat_prompt.ts";
import { modelToolFormat } from "../agent/tool_format.ts";
import { promptIds } from "../completions/kinds.ts";
import type { ObservedEnv } from "../middleware/count_requests.ts";
import { parseBody } from "../openai/body.ts";
import { ApiError } from "../openai/errors.ts";
import { DetokenizeRequest, TokenizeRequest } from "../openai/schemas.ts";
import { type ServerState, withChatModel } from "../state/server_state.ts";

export function tokenizeRoutes(state: ServerState): Hono<ObservedEnv> {
  return new Hono<ObservedEnv>()
    .post("/tokenize", async (c) => {
      const body = await parseBody(c, TokenizeRequest);
      return await withChatModel(state, body.model, async ({ runtime, prompts, tokenizer }) => {
        // The same ids the chat and completions endpoints would run.
        const tokens = await promptIds(
          prompts,
          body.messages
            ? chatPrompt(body.messages, {
              tools: body.tools,
              format: modelToolFormat(tokenizer),
              addGenerationPrompt: body.add_generation_prompt ?? true,
            })
            : { text: body.prompt!, addSpecialTokens: body.add_special_tokens ?? true },
        );
        return c.json({ count: tokens.length, max_model_len: runtime.info.maxContext, tokens });
      });
    })
    .post("/detokenize", async (c) => {
      const body = await parseBody(c, DetokenizeRequest);
      const { tokenizer } = await withChatModel(state, body.model, (chat) => chat);
      const bad = body.tokens.find((id) => id >= tokenizer.vocabSize);
      if (bad !== undefined) {
        throw new ApiError(
          400,
          `Token id ${bad} is outside the vocabulary (0..${tokenizer.vocabSize - 1})`,
          "tokens",
          "invalid_value",
        );
      }
      return c.json({ prompt: tokenizer.decode(body.tokens) });
    });
}
