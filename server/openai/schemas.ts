// The request bodies as zod schemas: OpenAI's two endpoints and vLLM's /tokenize and /detokenize,
// their shape only. Limits that depend on the model or the server (context, vocabulary,
// max_tokens) are the runtime's to check, once; so are grammars (a schema the grammar compiler
// cannot take is its 400). Sluice's extensions (reading_rate, slo_ttft_ms, slo_tbt_ms, top_k,
// ignore_eos, stream_options.include_timing), vLLM's (return_tokens_as_token_ids, priority,
// min_p, repetition_penalty, guided_*, structured_outputs) and llama.cpp's (json_schema, grammar,
// reasoning_format) are optional fields.
//
// Unknown fields are ignored, as OpenAI-compatible servers do. Known fields that Sluice does not
// implement and that would change the answer (legacy functions, echo, ...) are refused with a
// 400 naming the field, unless they are given their neutral value: a client must never take an
// answer made without them for one made with them.

import { z } from "zod";
import {
  MAX_LOGIT_BIAS_VALUE,
  MAX_PENALTY,
  MAX_PRIORITY,
  MAX_READING_RATE,
  MAX_REPETITION_PENALTY,
  MIN_PRIORITY,
  MIN_READING_RATE,
} from "../../runtime/service.ts";

/** A field Sluice does not implement: accepted only absent, null, or with its neutral value. */
function refused(message: string, isNeutral: (value: unknown) => boolean = () => false) {
  return z.unknown().refine((v) => v === null || isNeutral(v), { message }).optional();
}

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
  stream: z.boolean().nullish(),
  // include_timing (Sluice): each streamed chunk that carries tokens gets `sluice_timing`.
  stream_options: z.object({
    include_usage: z.boolean().nullish(),
    include_timing: z.boolean().nullish(),
  }).nullish(),
  // OpenAI's ranges; vLLM's min_p and repetition_penalty (1: off).
  presence_penalty: z.number().min(-MAX_PENALTY).max(MAX_PENALTY).nullish(),
  frequency_penalty: z.number().min(-MAX_PENALTY).max(MAX_PENALTY).nullish(),
  repetition_penalty: z.number().gt(0).max(MAX_REPETITION_PENALTY).nullish(),
  min_p: z.number().min(0).max(1).nullish(),
  // Token id (as a string key) → bias added to its logit; the runtime checks the ids.
  logit_bias: z.record(
    z.string().regex(/^\d+$/, { message: "logit_bias keys are token ids" }),
    z.number().min(-MAX_LOGIT_BIAS_VALUE).max(MAX_LOGIT_BIAS_VALUE),
  ).nullish(),
  user: z.string().nullish(),
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

/** A call in an assistant message of the history: its arguments are JSON text, as sent. */
const toolCall = z.object({
  id: z.string().min(1),
  type: z.literal("function"),
  function: z.object({ name: z.string().min(1), arguments: z.string() }),
});

const message = z.object({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: z.union([z.string(), z.array(textPart)]).nullish(),
  name: z.string().optional(),
  tool_calls: z.array(toolCall).nullish(),
  tool_call_id: z.string().min(1).nullish(),
}).refine((m) => !m.tool_calls?.length || m.role === "assistant", {
  message: "only assistant messages carry tool_calls",
  path: ["tool_calls"],
}).refine((m) => m.role !== "tool" || m.tool_call_id, {
  message: "a tool message needs the tool_call_id it answers",
  path: ["tool_call_id"],
}).refine((m) => m.content != null || m.role === "assistant" && m.tool_calls?.length, {
  message: "content is required (only an assistant message with tool_calls may omit it)",
  path: ["content"],
});
export type ChatMessageIn = z.infer<typeof message>;

/** A function the model may call; its name as OpenAI allows names. */
const tool = z.object({
  type: z.literal("function"),
  function: z.object({
    name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, {
      message: "a function name is 1-64 letters, digits, '_', '.' or '-'",
    }),
    description: z.string().nullish(),
    parameters: z.record(z.string(), z.unknown()).nullish(),
    strict: z.boolean().nullish(),
  }),
});
export type ToolIn = z.infer<typeof tool>;

/** none | auto | required, or one named function. */
const toolChoice = z.union([
  z.enum(["none", "auto", "required"]),
  z.object({ type: z.literal("function"), function: z.object({ name: z.string().min(1) }) }),
]);
export type ToolChoiceIn = z.infer<typeof toolChoice>;

/** A JSON Schema as a request gives it: an object (its validity is the grammar compiler's). */
const jsonSchema = z.record(z.string(), z.unknown());

/** OpenAI's response_format. */
const responseFormat = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    json_schema: z.object({
      name: z.string().min(1).max(64),
      description: z.string().nullish(),
      schema: jsonSchema.nullish(),
      strict: z.boolean().nullish(),
    }),
  }),
]);

/** vLLM's structured outputs (the newer object, and the older guided_* fields). */
const structuredOutputs = z.object({
  json: z.union([jsonSchema, z.string()]).nullish(),
  regex: z.string().nullish(),
  choice: z.array(z.string()).min(1).nullish(),
  grammar: z.string().nullish(),
  json_object: z.boolean().nullish(),
});

/** Most choices one request may ask for: each is a request of its own in the runtime. */
export const MAX_CHOICES = 8;

export const ChatRequest = z.object({
  ...samplingFields,
  messages: z.array(message).min(1),
  max_completion_tokens: z.number().int().min(1).nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  n: z.number().int().min(1).max(MAX_CHOICES).nullish(),
  tools: z.array(tool).max(128).nullish(),
  tool_choice: toolChoice.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  functions: refused("functions are deprecated and not supported: use tools", isEmptyArray),
  function_call: refused(
    "function_call is deprecated and not supported: use tool_choice",
    isOneOf("none", "auto"),
  ),
  response_format: responseFormat.nullish(),
  structured_outputs: structuredOutputs.nullish(),
  guided_json: z.union([jsonSchema, z.string()]).nullish(),
  guided_regex: z.string().nullish(),
  guided_choice: z.array(z.string()).min(1).nullish(),
  guided_grammar: z.string().nullish(),
  // llama.cpp's: a JSON Schema, or a GBNF grammar.
  json_schema: jsonSchema.nullish(),
  grammar: z.string().nullish(),
  // llama.cpp's: "none" leaves <think>…</think> in content; otherwise it goes to reasoning_content.
  reasoning_format: z.enum(["none", "auto", "deepseek"]).nullish(),
}).refine((b) => !b.top_logprobs || b.logprobs, {
  message: "top_logprobs needs logprobs: true",
  path: ["top_logprobs"],
}).refine((b) => {
  const c = b.tool_choice;
  return c == null || c === "none" || c === "auto" || (b.tools?.length ?? 0) > 0;
}, { message: "tool_choice requires tools", path: ["tool_choice"] }).refine((b) => {
  const c = b.tool_choice;
  return typeof c !== "object" || c === null ||
    (b.tools ?? []).some((t) => t.function.name === c.function.name);
}, { message: "tool_choice names a function that is not in tools", path: ["tool_choice"] });
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
  n: z.literal(1, { message: "only n = 1 is supported here" }).nullish(),
  // Structured output is chat's (response_format and its extensions).
  response_format: refused(
    'only {"type": "text"} is supported here (JSON output: /v1/chat/completions)',
    (v) => isObjectWith(v, "type", "text"),
  ),
  echo: z.literal(false, { message: "echo is not supported" }).nullish(),
  suffix: z.null({ message: "suffix is not supported" }).nullish(),
  best_of: z.literal(1, { message: "only best_of = 1 is supported" }).nullish(),
});
export type CompletionRequest = z.infer<typeof CompletionRequest>;

export function messageText(content: ChatMessageIn["content"]): string {
  if (content == null) return "";
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
  tools: z.array(tool).max(128).nullish(),
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
