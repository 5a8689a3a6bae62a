// The Responses API's request body (POST /v1/responses), its shape only: the chat path checks
// what it shares with chat completions (ranges, tools against tool_choice) once the body is
// translated (to_chat.ts). Sluice keeps nothing between requests, so what needs a stored response
// or conversation (previous_response_id, conversation, background) is refused; `store` is accepted
// (OpenAI's default is true) and nothing is stored. Unknown fields are ignored; known ones that
// would change the answer and are not implemented (hosted tools, images, files) are refused.

import { z } from "zod";

/** Text content, as the user gives it (input_text) or as an earlier answer had it (output_text). */
const textPart = z.object({
  type: z.enum(["input_text", "output_text"], {
    message:
      "only input_text and output_text content parts are supported (no images, files or audio)",
  }),
  text: z.string(),
});
/** Text or text parts, read as parts (a union would hide which part is wrong). */
const content = z.preprocess(
  (v) => typeof v === "string" ? [{ type: "input_text", text: v }] : v,
  z.array(textPart),
);

const message = z.object({
  type: z.literal("message"),
  role: z.enum(["user", "assistant", "system", "developer"]),
  content,
});

/** A call an earlier answer made, and its output, as the history gives them back. */
const functionCall = z.object({
  type: z.literal("function_call"),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
});
const functionCallOutput = z.object({
  type: z.literal("function_call_output"),
  call_id: z.string().min(1),
  output: content,
});

/** An earlier answer's reasoning: accepted so that histories replay, and left out of the prompt. */
const reasoning = z.object({ type: z.literal("reasoning") });

const itemTypes = "message, function_call, function_call_output and reasoning";
const item = z.preprocess(
  // An "easy" message ({role, content}) has no type.
  (v) => isObject(v) && !("type" in v) ? { ...v, type: "message" } : v,
  z.discriminatedUnion("type", [message, functionCall, functionCallOutput, reasoning], {
    message: `only ${itemTypes} input items are supported`,
  }),
);
export type InputItem = z.infer<typeof message | typeof functionCall | typeof functionCallOutput>;

const functionTool = z.object({
  type: z.literal("function", {
    message: "only function tools are supported (no hosted tools: web search, file search, ...)",
  }),
  name: z.string().min(1),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});

const toolChoice = z.union([
  z.enum(["none", "auto", "required"]),
  z.object({ type: z.literal("function"), name: z.string().min(1) }),
], { message: 'tool_choice is "none", "auto", "required" or {"type": "function", "name"}' });

const format = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    name: z.string().min(1),
    schema: z.record(z.string(), z.unknown()),
    description: z.string().nullish(),
    strict: z.boolean().nullish(),
  }),
], { message: "text.format is text, json_object or json_schema" });

/** Refused whenever given (null aside), with why. */
const refused = (message: string) => z.unknown().refine((v) => v === null, { message }).optional();
const stateless = "this server is stateless: it stores no responses or conversations; " +
  "send the whole history in `input`";

export const ResponsesRequest = z.object({
  model: z.string().min(1),
  // A string is one user message (read as that item: a union would hide which item is wrong).
  input: z.preprocess(
    (v) => typeof v === "string" ? [{ type: "message", role: "user", content: v }] : v,
    z.array(item).min(1),
  ),
  instructions: z.string().nullish(),
  max_output_tokens: z.number().int().min(1).nullish(),
  temperature: z.number().nullish(),
  top_p: z.number().nullish(),
  tools: z.array(functionTool).nullish(),
  tool_choice: toolChoice.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  text: z.object({ format: format.nullish() }).nullish(),
  stream: z.boolean().nullish(),
  store: z.boolean().nullish(), // accepted, nothing stored
  metadata: z.record(z.string(), z.string()).nullish(),
  user: z.string().nullish(),
  reasoning: z.record(z.string(), z.unknown()).nullish(), // accepted, ignored
  truncation: z.literal("disabled", {
    message: 'only "disabled" truncation is supported: a prompt too long is refused',
  }).nullish(),
  previous_response_id: refused(`previous_response_id is not supported: ${stateless}`),
  conversation: refused(`conversation is not supported: ${stateless}`),
  background: z.literal(false, { message: `background is not supported: ${stateless}` })
    .nullish(),
});
export type ResponsesRequest = z.infer<typeof ResponsesRequest>;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
