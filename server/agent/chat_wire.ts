// Chat completions' wire format for an assistant's events: the `delta`s of streamed chunks and the
// `message` of a whole response. Text is `content`; reasoning is `reasoning_content` (DeepSeek's
// and vLLM's name) and `reasoning` (vLLM's newer one), both sent; a tool call opens with its
// index, id, type and name (arguments "") and its arguments follow in fragments, as OpenAI
// streams them.

import type { AssistantEvent, ToolCall } from "./assistant_events.ts";

/** The deltas that carry `events`, in order: one per run of events of one kind (and call). */
export function chatDeltas(events: AssistantEvent[]): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  let last: { kind: string; delta: Record<string, unknown> } | null = null;
  for (const e of events) {
    const kind = e.type === "tool_arguments" ? `args:${e.index}` : e.type;
    if (e.type === "tool_call") {
      const call = {
        index: e.index,
        id: e.id,
        type: "function",
        function: { name: e.name, arguments: "" },
      };
      last = { kind: `args:${e.index}`, delta: { tool_calls: [call] } };
      out.push(last.delta);
      continue;
    }
    if (last?.kind !== kind) {
      last = { kind, delta: {} };
      out.push(last.delta);
    }
    const d = last.delta;
    if (e.type === "text") d.content = (d.content ?? "") + e.text;
    else if (e.type === "reasoning") {
      d.reasoning_content = (d.reasoning_content ?? "") + e.text;
      d.reasoning = d.reasoning_content;
    } else {
      const calls = d.tool_calls as { function: { arguments: string } }[] | undefined;
      if (calls) calls[0].function.arguments += e.fragment;
      else d.tool_calls = [{ index: e.index, function: { arguments: e.fragment } }];
    }
  }
  return out;
}

/** A turn's events gathered into one whole message. */
export class ChatMessageBuilder {
  #content = "";
  #reasoning = "";
  readonly #calls: ToolCall[] = [];

  add(events: AssistantEvent[]): void {
    for (const e of events) {
      if (e.type === "text") this.#content += e.text;
      else if (e.type === "reasoning") this.#reasoning += e.text;
      else if (e.type === "tool_call") {
        this.#calls[e.index] = { id: e.id, name: e.name, arguments: "" };
      } else this.#calls[e.index].arguments += e.fragment;
    }
  }

  /** OpenAI's message: content null when the turn is only tool calls. */
  message(): Record<string, unknown> {
    const calls = this.#calls.filter(Boolean);
    const m: Record<string, unknown> = {
      role: "assistant",
      content: calls.length && !this.#content ? null : this.#content,
    };
    if (this.#reasoning) {
      m.reasoning_content = this.#reasoning;
      m.reasoning = this.#reasoning;
    }
    if (calls.length) {
      m.tool_calls = calls.map((c) => ({
        id: c.id,
        type: "function",
        function: { name: c.name, arguments: c.arguments },
      }));
    }
    return m;
  }
}
