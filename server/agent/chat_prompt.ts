// A chat body's messages and tools as the model's chat template reads them, in Hugging Face's
// shapes: an assistant's tool calls with their arguments as objects, a tool message with the id of
// the call it answers, and the tools as the template's `tools` variable. Chat completions, the
// other agent APIs and /tokenize render through here, so a prompt is counted as it is run.

import type { ChatMessage, ChatTools, Prompt } from "../../runtime/service.ts";
import { ApiError } from "../openai/errors.ts";
import { type ChatMessageIn, messageText, type ToolIn } from "../openai/schemas.ts";

export interface ChatPromptOptions {
  tools?: ToolIn[] | null;
  addGenerationPrompt?: boolean;
}

export function chatPrompt(
  messages: ChatMessageIn[],
  { tools, addGenerationPrompt = true }: ChatPromptOptions = {},
): Prompt {
  const prompt: Prompt = { messages: messages.map(templateMessage), addGenerationPrompt };
  if (tools?.length) prompt.tools = templateTools(tools);
  return prompt;
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

function templateMessage(m: ChatMessageIn, at: number): ChatMessage {
  const out: ChatMessage = { role: m.role, content: messageText(m.content) };
  if (m.name != null) out.name = m.name;
  if (m.tool_call_id != null) out.tool_call_id = m.tool_call_id;
  if (m.tool_calls?.length) {
    out.tool_calls = m.tool_calls.map((call, i) => ({
      id: call.id,
      type: "function",
      function: {
        name: call.function.name,
        arguments: callArguments(call.function.arguments, at, i),
      },
    }));
  }
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
