// An Anthropic Messages request as the chat completions body it runs as. `system` is the first
// system message; an assistant message's text is its content and its tool_use blocks its
// tool_calls (input as JSON text); a user message's tool_result blocks become tool messages, ahead
// of its text (Anthropic puts results first). A failed tool's result is marked "Error: " (chat has
// no is_error). Thinking blocks are dropped. Tools, tool_choice (any: required; tool: that
// function; disable_parallel_tool_use: parallel_tool_calls false), stop_sequences (stop) and
// metadata.user_id (user) map onto their chat fields.

import type { ContentBlock, CountTokensRequest, MessagesRequest } from "./schema.ts";

type Message = Record<string, unknown>;

/** The chat body of a request; of a count_tokens request, its messages and tools only. */
export function toChat(body: MessagesRequest | CountTokensRequest): Record<string, unknown> {
  const messages: Message[] = [];
  if (body.system?.length) messages.push({ role: "system", content: joinText(body.system) });
  for (const m of body.messages) {
    if (m.role === "assistant") messages.push(assistantMessage(m.content));
    else messages.push(...userMessages(m.content));
  }
  const chat: Record<string, unknown> = { model: body.model, messages };
  if (body.tools?.length) {
    chat.tools = body.tools.map((t) => ({
      type: "function",
      function: { name: t.name, description: t.description, parameters: t.input_schema },
    }));
  }
  const choice = body.tool_choice;
  if (choice) {
    chat.tool_choice = choice.type === "any"
      ? "required"
      : choice.type === "tool"
      ? { type: "function", function: { name: choice.name } }
      : choice.type;
    if (choice.disable_parallel_tool_use) chat.parallel_tool_calls = false;
  }
  if (!("max_tokens" in body)) return chat;
  return {
    ...chat,
    max_tokens: body.max_tokens,
    stop: body.stop_sequences?.length ? body.stop_sequences : undefined,
    temperature: body.temperature,
    top_p: body.top_p,
    top_k: body.top_k,
    stream: body.stream,
    user: body.metadata?.user_id,
  };
}

function assistantMessage(blocks: ContentBlock[]): Message {
  const calls = blocks.flatMap((b) =>
    b.type === "tool_use"
      ? [{
        id: b.id,
        type: "function",
        function: { name: b.name, arguments: JSON.stringify(b.input) },
      }]
      : []
  );
  const message: Message = { role: "assistant", content: joinText(blocks) };
  if (calls.length) message.tool_calls = calls;
  return message;
}

function userMessages(blocks: ContentBlock[]): Message[] {
  const out: Message[] = [];
  for (const b of blocks) {
    if (b.type !== "tool_result") continue;
    const text = joinText(b.content ?? []);
    out.push({
      role: "tool",
      tool_call_id: b.tool_use_id,
      content: b.is_error ? `Error: ${text}` : text,
    });
  }
  // A message of tool results only has no user text after them.
  if (out.length === 0 || blocks.some((b) => b.type === "text")) {
    out.push({ role: "user", content: joinText(blocks) });
  }
  return out;
}

function joinText(blocks: readonly { type: string; text?: string }[]): string {
  return blocks.map((b) => b.type === "text" ? b.text : "").join("");
}
