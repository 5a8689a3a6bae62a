// What an assistant's turn is made of once its text is read: answer text, reasoning text, and tool
// calls (a call begins with its id and name, then its JSON arguments arrive in fragments). Chat
// completions, the Responses API and the Messages API all write their wire formats from these
// events, so each parses the model's output the same way.

export type AssistantEvent =
  | { type: "text"; text: string }
  | { type: "reasoning"; text: string }
  | { type: "tool_call"; index: number; id: string; name: string }
  | { type: "tool_arguments"; index: number; fragment: string };

/** A whole tool call: its arguments are a JSON object's text. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** Why a turn ended, as chat completions names it ("tool_calls": it ended in tool calls). */
export type TurnFinish = "stop" | "length" | "tool_calls" | "cancelled" | "shutdown" | "error";
