// The Ollama request bodies as zod schemas: /api/chat, /api/generate, /api/show. Shapes are
// Ollama's (docs/api.md, the `ollama` clients); what Sluice cannot do is refused by the schema
// with the reason (images: no vision; think levels; generate's suffix and template; logprobs),
// never dropped. Sampling options are options.ts's, keep_alive keep_alive.ts's. One Sluice
// extension: chat's `tool_choice` (OpenAI's values), since Ollama has no way to force a call.

import { z } from "zod";
import { keepAliveField } from "./keep_alive.ts";
import { MAX_INPUTS } from "../embeddings/schema.ts";
import { OllamaOptions } from "./options.ts";

const noImages = z.array(z.string()).refine((a) => a.length === 0, {
  message: "this model has no vision: images are not supported",
}).nullish();

/** `think`: true or false (levels are gpt-oss's, and no model Sluice runs takes them). */
const think = z.union([z.boolean(), z.string()]).refine((t) => typeof t === "boolean", {
  message: "only true or false is supported (this model has no reasoning levels)",
}).transform((t) => t as boolean).nullish();

/** `format`: "json", a JSON schema, or "" (none). */
const format = z.union([
  z.literal("json"),
  z.literal(""),
  z.record(z.string(), z.unknown()),
], { error: 'format is "json" or a JSON schema object' }).nullish();

/** Log probabilities are served by /v1 only. */
const noLogprobs = {
  logprobs: z.literal(false, { error: "logprobs are not supported here (use /v1)" }).nullish(),
  top_logprobs: z.literal(0, { error: "logprobs are not supported here (use /v1)" }).nullish(),
};

/** A call in an assistant message of the history: arguments as an object, as Ollama sends them. */
const toolCall = z.object({
  id: z.string().min(1).nullish(),
  function: z.object({
    index: z.number().int().min(0).nullish(),
    name: z.string().min(1),
    arguments: z.record(z.string(), z.unknown()).default({}),
  }),
});

const message = z.object({
  role: z.enum(["system", "user", "assistant", "tool"]),
  content: z.string().default(""),
  // Earlier reasoning is not sent back to the model (as chat templates drop it).
  thinking: z.string().nullish(),
  images: noImages,
  tool_calls: z.array(toolCall).nullish(),
  tool_name: z.string().nullish(),
  tool_call_id: z.string().nullish(),
}).refine((m) => !m.tool_calls?.length || m.role === "assistant", {
  message: "only assistant messages carry tool_calls",
  path: ["tool_calls"],
});
export type OllamaMessage = z.infer<typeof message>;

const tool = z.object({
  type: z.literal("function"),
  function: z.object({
    name: z.string().min(1),
    description: z.string().nullish(),
    parameters: z.record(z.string(), z.unknown()).nullish(),
  }),
});

const toolChoice = z.union([
  z.enum(["none", "auto", "required"]),
  z.object({ type: z.literal("function"), function: z.object({ name: z.string().min(1) }) }),
]);

const common = {
  model: z.string().min(1),
  stream: z.boolean().nullish(),
  format,
  options: OllamaOptions.nullish(),
  keep_alive: keepAliveField.nullish(),
  think,
  ...noLogprobs,
};

export const OllamaChatRequest = z.object({
  ...common,
  messages: z.array(message).default([]),
  tools: z.array(tool).max(128).nullish(),
  tool_choice: toolChoice.nullish(),
});
export type OllamaChatRequest = z.infer<typeof OllamaChatRequest>;

const absent = (message: string) => z.unknown().refine((v) => v == null, { message }).optional();

const refusedText = (message: string) => z.string().refine((s) => s === "", { message }).nullish();

export const OllamaGenerateRequest = z.object({
  ...common,
  prompt: z.string().default(""),
  system: z.string().nullish(),
  raw: z.boolean().nullish(),
  // A previous answer's `context`: its token ids, run before this prompt.
  context: z.array(z.number().int().min(0)).nullish(),
  images: noImages,
  suffix: refusedText("fill-in-the-middle (suffix) is not supported"),
  template: refusedText("only the model's own chat template is supported (or raw: true)"),
  width: absent("image generation is not supported"),
  height: absent("image generation is not supported"),
  steps: absent("image generation is not supported"),
}).refine((b) => !(b.raw && b.system), {
  message: "system has no place in a raw prompt (write it into the prompt)",
  path: ["system"],
});
export type OllamaGenerateRequest = z.infer<typeof OllamaGenerateRequest>;

/** /api/show: `model` (older clients send `name`). */
export const OllamaShowRequest = z.object({
  model: z.string().min(1).optional(),
  name: z.string().min(1).optional(),
  verbose: z.boolean().nullish(),
}).refine((b) => b.model ?? b.name, { message: "model is required", path: ["model"] });
export type OllamaShowRequest = z.infer<typeof OllamaShowRequest>;

export const OllamaEmbedRequest = z.object({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.string()).min(1).max(MAX_INPUTS)]),
  truncate: z.boolean().default(true),
  dimensions: z.number().int().min(1).nullish(),
  options: z.record(z.string(), z.unknown()).nullish(),
  keep_alive: keepAliveField.nullish(),
});

export const OllamaEmbeddingsRequest = z.object({
  model: z.string().min(1),
  prompt: z.string(),
  options: z.record(z.string(), z.unknown()).nullish(),
  keep_alive: keepAliveField.nullish(),
});
