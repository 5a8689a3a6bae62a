// What the Ollama writers (wire.ts, respond.ts) read of a running answer, for chat and generate
// alike: pieces of content and thinking, and whole tool calls (Ollama sends a call only once its
// arguments are complete, as an object), then how it ended. chatReply reads a chat turn's
// assistant events into these; generate_run.ts makes them from a text run.

import type { AssistantEvent } from "../agent/assistant_events.ts";
import type { ChatRun } from "../agent/chat_run.ts";
import { completed } from "../agent/respond_turn.ts";

export interface OllamaToolCall {
  id: string;
  function: { index: number; name: string; arguments: Record<string, unknown> };
}

export interface Delta {
  content?: string;
  thinking?: string;
  toolCalls?: OllamaToolCall[];
}

export interface ReplyEnd {
  doneReason: "stop" | "length";
  evalCount: number;
  /** generate's `context`: the prompt's and the answer's token ids. */
  context?: number[];
}

export interface Reply {
  /** The running request's id (the sluice-request-id header; /v1/requests/{id}/priority). */
  id: string;
  promptTokens: number;
  /** Read to the end before calling end(). */
  deltas: AsyncIterable<Delta>;
  /** How it ended; throws the ApiError of an answer that did not complete. */
  end(): Promise<ReplyEnd>;
}

export function chatReply(run: ChatRun): Reply {
  return {
    id: run.id,
    promptTokens: run.promptTokens,
    deltas: deltasOf(run.events),
    end: async () => {
      const { finish, completionTokens } = completed(await run.done);
      // Ollama ends a turn of tool calls as "stop".
      return { doneReason: finish === "length" ? "length" : "stop", evalCount: completionTokens };
    },
  };
}

async function* deltasOf(events: AsyncIterable<AssistantEvent>): AsyncIterable<Delta> {
  let call: { id: string; index: number; name: string; json: string } | null = null;
  const whole = (): Delta => {
    const { id, index, name, json } = call!;
    call = null;
    return { toolCalls: [{ id, function: { index, name, arguments: argumentsOf(json) } }] };
  };
  for await (const ev of events) {
    if (ev.type === "tool_arguments") {
      if (call) call.json += ev.fragment;
      continue;
    }
    if (call) yield whole();
    if (ev.type === "tool_call") call = { id: ev.id, index: ev.index, name: ev.name, json: "" };
    else if (ev.type === "text") yield { content: ev.text };
    else yield { thinking: ev.text };
  }
  if (call) yield whole();
}

/** A call's arguments as the object Ollama sends; one cut short (done_reason "length"): {}. */
function argumentsOf(json: string): Record<string, unknown> {
  try {
    const value = JSON.parse(json || "{}");
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}
