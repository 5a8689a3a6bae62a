// The request bodies as zod schemas: OpenAI's two endpoints and vLLM's /tokenize and /detokenize,
// their shape only. Limits that depend on the model or the server (context, vocabulary,
// max_tokens) are the runtime's to check, once. Sluice's extensions (reading_rate, slo_ttft_ms,
// slo_tbt_ms, top_k, ignore_eos, stream_options.include_timing) and vLLM's
// return_tokens_as_token_ids and priority are optional fields.
//
// Unknown fields are ignored, as OpenAI-compatible servers do. Known fields that Sluice does not
// implement and that would change the answer (tools, JSON mode, logit_bias, ...) are refused with
// a 400 naming the field, unless they are given their neutral value: a client must never take an
// answer made without them for one made with them.

import { z } from "zod";
import {
  MAX_PRIORITY,
  MAX_READING_RATE,
  MIN_PRIORITY,
  MIN_READING_RATE,
} from "../../runtime/service.ts";

/** A field Sluice does not implement: accepted only absent, null, or with its neutral value. */
function refused(message: string, isNeutral: (value: unknown) => boolean = () => false) {
  return z.unknown().refine((v) => v === null || isNeutral(v), { message }).optional();
}

const isEmptyObject = (v: unknown) =>
  typeof v === "object" && v !== null && !Array.isArray(v) && Object.keys(v).length === 0;
const isEmptyArray = (v: unknown) => Array.isArray(v) && v.length === 0;
const isOneOf = (...values: unknown[]) => (v: unknown) => values.includes(v);
const isObjectWith = (v: unknown, key: string, value: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && (v as Record<string, unknown>)[key] === value;

/** Stop strings: up to four, none empty (an empty one would stop before the first character). */
const stop = z.union([z.string(), z.array(z.string()).max(4)]).refine(
  (s) => (typeof s === "string" ? [s] : s).every((one) => one.length > 0),
  { message: "stop strings must not be empty" },
);

/** A request's priority (runtime/policy/priority.ts). */
const priority = z.number().int().min(MIN_PRIORITY).max(MAX_PRIORITY);

const samplingFields = {
  model: z.string().min(1),
  max_tokens: z.number().int().min(1).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  top_k: z.number().int().min(0).nullish(),
  seed: z.number().int().nullish(),
  stop: stop.nullish(),
  n: z.literal(1, { message: "only n = 1 is supported" }).nullish(),
  stream: z.boolean().nullish(),
  // include_timing (Sluice): each streamed chunk that carries tokens gets `sluice_timing`.
  stream_options: z.object({
    include_usage: z.boolean().nullish(),
    include_timing: z.boolean().nullish(),
  }).nullish(),
  presence_penalty: z.literal(0, { message: "presence_penalty is not supported (only 0)" })
    .nullish(),
  frequency_penalty: z.literal(0, { message: "frequency_penalty is not supported (only 0)" })
    .nullish(),
  user: z.string().nullish(),
  logit_bias: refused("logit_bias is not supported", isEmptyObject),
  response_format: refused(
    'only {"type": "text"} is supported (no JSON mode or JSON schema)',
    (v) => isObjectWith(v, "type", "text"),
  ),
  // vLLM's sampling extensions, refused unless neutral.
  min_p: refused("min_p is not supported (only 0)", isOneOf(0)),
  repetition_penalty: refused("repetition_penalty is not supported (only 1)", isOneOf(1)),
  // vLLM's: name logprob tokens "token_id:N" instead of their text (server/openai/logprobs.ts).
  return_tokens_as_token_ids: z.boolean().nullish(),
  // Sluice extensions. The reading rate's range is the token buffer's: a slower rate would ask its
  // pacer for a timer longer than timers allow.
  // 0: unpaced (overrides a server default --reading-rate).
  reading_rate: z.union([z.literal(0), z.number().min(MIN_READING_RATE).max(MAX_READING_RATE)])
    .nullish(),
  slo_ttft_ms: z.number().positive().nullish(),
  slo_tbt_ms: z.number().positive().nullish(),
  ignore_eos: z.boolean().nullish(),
  // vLLM's: lower is served first, default 0 (Sluice: bounded, and changeable while it runs).
  priority: priority.nullish(),
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

const noTools = "this server does not call tools or functions";
export const ChatRequest = z.object({
  ...samplingFields,
  messages: z.array(message).min(1),
  max_completion_tokens: z.number().int().min(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  tools: refused(`tools are not supported: ${noTools}`, isEmptyArray),
  tool_choice: refused(`only "none" and "auto" are supported: ${noTools}`, isOneOf("none", "auto")),
  functions: refused(`functions are not supported: ${noTools}`, isEmptyArray),
  function_call: refused(
    `only "none" and "auto" are supported: ${noTools}`,
    isOneOf("none", "auto"),
  ),
  parallel_tool_calls: z.boolean().nullish(), // moot without tools
}).refine((b) => !b.top_logprobs || b.logprobs, {
  message: "top_logprobs needs logprobs: true",
  path: ["top_logprobs"],
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

// vLLM's /tokenize and /detokenize (llama.cpp's take `content` and answer `{tokens}` and
// `{content}`; Sluice follows vLLM, whose shapes carry the model and the context length).

/** `{model?, prompt}` (text, special tokens added by default) or `{model?, messages}` (chat). */
export const TokenizeRequest = z.object({
  model: z.string().min(1).nullish(),
  prompt: z.string().optional(),
  messages: z.array(message).min(1).optional(),
  /** For a prompt; default true. Messages get what their template places, as in a chat. */
  add_special_tokens: z.boolean().nullish(),
  add_generation_prompt: z.boolean().nullish(),
  return_token_strs: refused("return_token_strs is not supported", isOneOf(false)),
  continue_final_message: refused("continue_final_message is not supported", isOneOf(false)),
  chat_template: refused("chat_template is not supported: the model's own template is used"),
  tools: refused(`tools are not supported: ${noTools}`, isEmptyArray),
}).refine((b) => (b.prompt === undefined) !== (b.messages === undefined), {
  message: "give exactly one of 'prompt' and 'messages'",
  path: ["prompt"],
}).refine((b) => !(b.messages && b.add_special_tokens), {
  message: "add_special_tokens is not supported with messages: the chat template places them",
  path: ["add_special_tokens"],
});
export type TokenizeRequest = z.infer<typeof TokenizeRequest>;

export const DetokenizeRequest = z.object({
  model: z.string().min(1).nullish(),
  tokens: z.array(z.number().int().min(0)),
});
export type DetokenizeRequest = z.infer<typeof DetokenizeRequest>;

/** POST /v1/requests/{id}/priority: a running request's new priority. */
export const PriorityRequest = z.object({ priority });
export type PriorityRequest = z.infer<typeof PriorityRequest>;
