// A chat body's messages and tools as the model's chat template reads them, in Hugging Face's
// shapes: an assistant's tool calls with their arguments as objects, a tool message with the id of
// the call it answers, and the tools as the template's `tools` variable. A template that cannot
// show tools (the generic format, tool_format.ts) gets none: the tools go in a system message
// (generic_tool_prompt.ts) and earlier calls are written as the JSON the model was asked for.
// Chat completions, the other agent APIs and /tokenize render through here, so a prompt is
// counted as it is run.

import type { ChatMessage, ChatTools, Prompt, Tokenizer } from "../../runtime/service.ts";
import { ApiError } from "../openai/errors.ts";
import {
  type ChatMessageIn,
  type ChatRequest,
  messageText,
  type ToolChoiceIn,
  type ToolIn,
} from "../openai/schemas.ts";
import { genericToolPrompt } from "./generic_tool_prompt.ts";
import { modelToolFormat } from "./tool_format.ts";
import type { ToolDefinition, ToolFormat } from "./tools.ts";

export interface ChatPromptOptions {
  tools?: ToolIn[] | null;
  toolChoice?: ToolChoiceIn | null;
  parallelToolCalls?: boolean;
  /** How the model calls tools (tool_format.ts); "generic": its template cannot show them. */
  format: ToolFormat;
  addGenerationPrompt?: boolean;
}

export function chatPrompt(
  messages: ChatMessageIn[],
  { tools, toolChoice, parallelToolCalls, format, addGenerationPrompt = true }: ChatPromptOptions,
): Prompt {
  const generic = format === "generic";
  const rendered = messages.map((m, i) => templateMessage(m, i, generic));
  if (!tools?.length) return { messages: rendered, addGenerationPrompt };
  if (!generic) return { messages: rendered, addGenerationPrompt, tools: templateTools(tools) };
  const offer = genericToolPrompt(
    toolDefinitions(tools),
    toolChoice ?? "auto",
    parallelToolCalls ?? true,
  );
  if (offer === null) return { messages: rendered, addGenerationPrompt };
  // One system message: templates may place only the first.
  const [head, ...rest] = rendered;
  const system = head.role === "system" || head.role === "developer"
    ? [{ role: head.role, content: `${head.content}\n\n${offer}` }, ...rest]
    : [{ role: "system", content: offer }, ...rendered];
  return { messages: system, addGenerationPrompt };
}

/** A chat body's prompt as a turn runs it: the tool format read from the model's template. */
export function turnPrompt(
  tokenizer: Tokenizer,
  body: Pick<ChatRequest, "messages" | "tools" | "tool_choice" | "parallel_tool_calls">,
): Prompt {
  return chatPrompt(body.messages, {
    tools: body.tools,
    toolChoice: body.tool_choice,
    parallelToolCalls: body.parallel_tool_calls ?? true,
    format: modelToolFormat(tokenizer),
  });
}

/** The tools in the shapes the agent readers take (tools.ts). */
export function toolDefinitions(tools: ToolIn[]): ToolDefinition[] {
  return tools.map(({ function: f }) => ({
    type: "function",
    function: {
      name: f.name,
      ...(f.description != null && { description: f.description }),
      ...(f.parameters != null && { parameters: f.parameters }),
      strict: f.strict,
    },
  }));
}

/** The `tools` variable: each tool as OpenAI sends it, parameters defaulting to none. */
export function templateTools(tools: ToolIn[]): ChatTools {
  return tools.map((t) => ({
    type: "function",
    function: {
      name: t.function.name,
      ...(t.function.description != null && { description: t.function.description }),
      parameters: t.function.parameters ?? { type: "object", properties: {} },
    },
  }));
}

function templateMessage(m: ChatMessageIn, at: number, generic: boolean): ChatMessage {
  const out: ChatMessage = { role: m.role, content: messageText(m.content) };
  if (m.name != null) out.name = m.name;
  if (m.tool_call_id != null) out.tool_call_id = m.tool_call_id;
  if (!m.tool_calls?.length) return out;
  const calls = m.tool_calls.map((call, i) => ({
    id: call.id,
    type: "function" as const,
    function: {
      name: call.function.name,
      arguments: callArguments(call.function.arguments, at, i),
    },
  }));
  if (generic) {
    // The generic format's own answer: what the model would have written for these calls.
    const json = { tool_calls: calls.map((c) => c.function) };
    out.content = [out.content, JSON.stringify(json)].filter(Boolean).join("\n");
  } else out.tool_calls = calls;
  return out;
}

/** Templates write the arguments back as JSON: they must be a JSON object's text. */
function callArguments(text: string, message: number, call: number): Record<string, unknown> {
  let value: unknown;
  try {
    value = text.trim() === "" ? {} : JSON.parse(text);
  } catch {
    value = undefined;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    const param = `messages.${message}.tool_calls.${call}.function.arguments`;
    throw new ApiError(400, `Invalid '${param}': not a JSON object`, param, "invalid_value");
  }
  return value as Record<string, unknown>;
}
