// A Responses API request as the chat completions body it runs as. Input items become messages:
// `instructions` the first system message, function_call items (with the assistant message before
// them) one assistant message's tool_calls, function_call_output items tool messages; reasoning
// items are dropped (the chat prompt has no place for an earlier turn's reasoning). Function tools,
// tool_choice and text.format map onto their chat fields; `store`, `metadata` and `reasoning`
// only echo back (response.ts).

import type { ResponsesRequest } from "./schema.ts";

type Message = Record<string, unknown> & { role: string };
type Item = ResponsesRequest["input"][number];

export function toChat(body: ResponsesRequest): Record<string, unknown> {
  const messages: Message[] = [];
  if (body.instructions != null) messages.push({ role: "system", content: body.instructions });
  for (const item of body.input) addItem(messages, item);
  const chat: Record<string, unknown> = {
    model: body.model,
    messages,
    max_completion_tokens: body.max_output_tokens,
    temperature: body.temperature,
    top_p: body.top_p,
    parallel_tool_calls: body.parallel_tool_calls,
    user: body.user,
    stream: body.stream,
  };
  if (body.tools?.length) {
    chat.tools = body.tools.map(({ name, description, parameters, strict }) => ({
      type: "function",
      function: { name, description, parameters, strict },
    }));
  }
  const choice = body.tool_choice;
  if (choice != null) {
    chat.tool_choice = typeof choice === "string"
      ? choice
      : { type: "function", function: { name: choice.name } };
  }
  const format = body.text?.format;
  if (format != null) {
    chat.response_format = format.type === "json_schema"
      ? {
        type: "json_schema",
        json_schema: {
          name: format.name,
          description: format.description,
          schema: format.schema,
          strict: format.strict,
        },
      }
      : { type: format.type };
  }
  return chat;
}

function addItem(messages: Message[], item: Item): void {
  switch (item.type) {
    case "message":
      messages.push({ role: item.role, content: item.content.map((p) => p.text).join("") });
      return;
    case "function_call": {
      const call = {
        id: item.call_id,
        type: "function",
        function: { name: item.name, arguments: item.arguments },
      };
      // Calls follow the assistant message they belong to, when there is one.
      const last = messages.at(-1);
      if (last?.role === "assistant") {
        last.tool_calls = [...(last.tool_calls as object[] | undefined ?? []), call];
      } else messages.push({ role: "assistant", content: null, tool_calls: [call] });
      return;
    }
    case "function_call_output":
      messages.push({
        role: "tool",
        tool_call_id: item.call_id,
        content: item.output.map((p) => p.text).join(""),
      });
      return;
    case "reasoning":
      return;
  }
}
