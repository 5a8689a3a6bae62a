// OpenAI's request bodies as zod schemas: their shape only. Limits that depend on the model or the
// server (context, vocabulary, max_tokens) are the runtime's to check, once. Sluice's extensions
// (reading_rate, slo_ttft_ms, slo_tbt_ms, top_k, ignore_eos) are optional fields.

import { z } from "zod";
import { MAX_READING_RATE, MIN_READING_RATE } from "../../runtime/service.ts";

const samplingFields = {
  model: z.string().min(1),
  max_tokens: z.number().int().min(1).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  top_k: z.number().int().min(0).nullish(),
  seed: z.number().int().nullish(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).nullish(),
  n: z.literal(1, { message: "only n = 1 is supported" }).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  presence_penalty: z.literal(0, { message: "presence_penalty is not supported (only 0)" })
    .nullish(),
  frequency_penalty: z.literal(0, { message: "frequency_penalty is not supported (only 0)" })
    .nullish(),
  user: z.string().nullish(),
  // Sluice extensions. The reading rate's range is the token buffer's: a slower rate would ask its
  // pacer for a timer longer than timers allow.
  // 0: unpaced (overrides a server default --reading-rate).
  reading_rate: z.union([z.literal(0), z.number().min(MIN_READING_RATE).max(MAX_READING_RATE)])
    .nullish(),
  slo_ttft_ms: z.number().positive().nullish(),
  slo_tbt_ms: z.number().positive().nullish(),
  ignore_eos: z.boolean().nullish(),
};

/** The fields both endpoints share: the request builder reads only these. */
export const SharedFields = z.object(samplingFields);
export type SharedFields = z.infer<typeof SharedFields>;

const textPart = z.object({ type: z.literal("text"), text: z.string() });
const message = z.object({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: z.union([z.string(), z.array(textPart)]).nullable(),
  name: z.string().optional(),
});

export const ChatRequest = z.object({
  ...samplingFields,
  messages: z.array(message).min(1),
  max_completion_tokens: z.number().int().min(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
});
export type ChatRequest = z.infer<typeof ChatRequest>;

const tokenIds = z.array(z.number().int().min(0)).min(1);
export const CompletionRequest = z.object({
  ...samplingFields,
  prompt: z.union([
    z.string(),
    z.array(z.string()).length(1, { message: "only one prompt per request is supported" }),
    tokenIds,
    z.array(tokenIds).length(1, { message: "only one prompt per request is supported" }),
  ]),
  logprobs: z.number().int().min(0).max(20).nullish(),
  echo: z.literal(false, { message: "echo is not supported" }).nullish(),
  suffix: z.null({ message: "suffix is not supported" }).nullish(),
  best_of: z.literal(1, { message: "only best_of = 1 is supported" }).nullish(),
});
export type CompletionRequest = z.infer<typeof CompletionRequest>;

export function messageText(content: z.infer<typeof message>["content"]): string {
  if (content === null) return "";
  return typeof content === "string" ? content : content.map((p) => p.text).join("");
}
