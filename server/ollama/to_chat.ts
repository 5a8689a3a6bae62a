// An Ollama chat request as the chat completions body it runs as (agent/chat_run.ts): messages,
// tools, format (format.ts), options (options.ts) and think mapped onto chat's fields. Ollama's
// calls carry no ids and its tool messages name the tool, not the call: each call gets an id
// here, and a tool message answers the oldest unanswered call of its tool_name (or, without one,
// the oldest unanswered call). `think`: true splits reasoning into message.thinking, false leaves
// any the model writes in the content (Sluice cannot switch a template's thinking off), absent
// follows the server's --reasoning-format.

import { badField } from "./errors.ts";
import { responseFormat } from "./format.ts";
import { samplingFields } from "./options.ts";
import type { OllamaChatRequest, OllamaMessage } from "./schema.ts";

type Message = Record<string, unknown>;

export function toChat(body: OllamaChatRequest): Record<string, unknown> {
  const tools = body.tools?.length ? body.tools : undefined;
  const format = responseFormat(body.format);
  if (format && tools && body.tool_choice !== "none") {
    throw badField(
      "format",
      "cannot be combined with tools (a JSON answer and a call are two turns)",
    );
  }
  return {
    model: body.model,
    messages: chatMessages(body.messages),
    tools,
    tool_choice: body.tool_choice ?? undefined,
    response_format: format,
    reasoning_format: reasoningFormat(body.think),
    stream: body.stream ?? true,
    ...samplingFields(body.options ?? undefined),
  };
}

export function reasoningFormat(think: boolean | null | undefined): string | undefined {
  return think == null ? undefined : think ? "auto" : "none";
}

function chatMessages(messages: OllamaMessage[]): Message[] {
  const pending: { id: string; name: string }[] = [];
  return messages.map((m, at) => {
    if (m.role === "tool") return toolMessage(m, at, pending);
    const out: Message = { role: m.role, content: m.content };
    if (m.role !== "assistant" || !m.tool_calls?.length) return out;
    out.tool_calls = m.tool_calls.map((call, i) => {
      const id = call.id ?? `call_${at}_${i}`;
      pending.push({ id, name: call.function.name });
      return {
        id,
        type: "function",
        function: { name: call.function.name, arguments: JSON.stringify(call.function.arguments) },
      };
    });
    return out;
  });
}

function toolMessage(m: OllamaMessage, at: number, pending: { id: string; name: string }[]) {
  let i = m.tool_call_id
    ? pending.findIndex((p) => p.id === m.tool_call_id)
    : m.tool_name
    ? pending.findIndex((p) => p.name === m.tool_name)
    : 0;
  if (!m.tool_call_id && !m.tool_name && pending.length === 0) i = -1;
  if (i < 0) {
    throw badField(`messages.${at}`, "a tool message must follow the assistant call it answers");
  }
  const [call] = pending.splice(i, 1);
  return { role: "tool", tool_call_id: call.id, content: m.content };
}
