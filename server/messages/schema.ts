// Anthropic's Messages API request bodies (POST /v1/messages and /v1/messages/count_tokens), their
// shape only: the chat path checks what it shares with chat completions once the body is
// translated (to_chat.ts). Content is text, tool_use and tool_result blocks; an earlier answer's
// thinking blocks are accepted and left out of the prompt. Images, documents and server tools
// would change the answer and are refused. Unknown fields are ignored.

import { z } from "zod";

const textBlock = z.object({ type: z.literal("text"), text: z.string() });

/** Text, or text blocks, read as blocks (a union would hide which block is wrong). */
const asBlocks = <T extends z.ZodType>(block: T) =>
  z.preprocess((v) => typeof v === "string" ? [{ type: "text", text: v }] : v, z.array(block));

const toolUse = z.object({
  type: z.literal("tool_use"),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.record(z.string(), z.unknown()),
});
const toolResult = z.object({
  type: z.literal("tool_result"),
  tool_use_id: z.string().min(1),
  content: asBlocks(textBlock).optional(),
  is_error: z.boolean().nullish(),
});
/** An earlier answer's thinking, accepted so that histories replay. */
const thinking = z.object({ type: z.enum(["thinking", "redacted_thinking"]) });

const block = z.discriminatedUnion("type", [textBlock, toolUse, toolResult, thinking], {
  message:
    "only text, tool_use, tool_result and thinking blocks are supported (no images or documents)",
});
export type ContentBlock = z.infer<typeof block>;

const message = z.object({
  role: z.enum(["user", "assistant"]),
  content: asBlocks(block),
});

const tool = z.object({
  // Server tools (web search, code execution, ...) have a type; client tools none, or "custom".
  type: z.literal("custom", {
    message: "only client tools ({name, description, input_schema}) are supported",
  }).optional(),
  name: z.string().min(1),
  description: z.string().nullish(),
  input_schema: z.record(z.string(), z.unknown()),
});

const toolChoice = z.object({
  type: z.enum(["auto", "any", "tool", "none"]),
  name: z.string().min(1).optional(),
  disable_parallel_tool_use: z.boolean().optional(),
}).refine((c) => c.type !== "tool" || c.name, {
  message: 'tool_choice of type "tool" needs the tool\'s name',
  path: ["name"],
});

/** What count_tokens counts: the prompt. */
export const CountTokensRequest = z.object({
  model: z.string().min(1),
  system: asBlocks(textBlock).optional(),
  messages: z.array(message).min(1),
  tools: z.array(tool).optional(),
  tool_choice: toolChoice.optional(),
  // Accepted; the model's template decides whether it thinks.
  thinking: z.object({ type: z.enum(["enabled", "disabled", "adaptive"]) }).passthrough()
    .optional(),
});
export type CountTokensRequest = z.infer<typeof CountTokensRequest>;

export const MessagesRequest = CountTokensRequest.extend({
  max_tokens: z.number().int().min(1),
  stop_sequences: z.array(z.string()).optional(),
  temperature: z.number().optional(),
  top_p: z.number().optional(),
  top_k: z.number().int().optional(),
  stream: z.boolean().optional(),
  metadata: z.object({ user_id: z.string().nullish() }).optional(),
});
export type MessagesRequest = z.infer<typeof MessagesRequest>;
