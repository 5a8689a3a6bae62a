// Writes a turn as Anthropic's Messages API answers it. Each run of assistant events of one kind
// is a content block: text a text block, reasoning a thinking block, each tool call a tool_use
// block whose input arrives as JSON fragments. A stream is message_start and a ping, then per
// block content_block_start, its deltas (text_delta, thinking_delta, input_json_delta) and
// content_block_stop, then message_delta (the stop reason, output tokens) and message_stop. The
// JSON answer is the message with every block whole. Thinking blocks carry an empty signature:
// nothing here signs them, and nothing checks one sent back.

import type { AssistantEvent } from "../agent/assistant_events.ts";
import type { CompleteFinish, TurnWriter, WireEvent } from "../agent/respond_turn.ts";
import type { ApiError } from "../openai/errors.ts";
import { anthropicError } from "./errors.ts";

export type StopReason = "end_turn" | "max_tokens" | "tool_use" | "stop_sequence";

const stopReasons: Record<CompleteFinish, StopReason> = {
  stop: "end_turn",
  length: "max_tokens",
  tool_calls: "tool_use",
};

export interface MessageHead {
  id: string;
  model: string;
  promptTokens: number;
}

interface Block {
  kind: "text" | "thinking" | "tool_use";
  text: string;
  /** The tool call's id and name. */
  id?: string;
  name?: string;
}

export class MessagesWriter implements TurnWriter {
  private readonly blocks: Block[] = [];
  private open: Block | null = null;
  /** Tool calls' blocks by the call's index in the turn. */
  private readonly calls = new Map<number, { block: Block; index: number }>();
  private stopReason: StopReason | null = null;
  private stopSequence: string | null = null;
  private outputTokens = 0;

  constructor(private readonly head: MessageHead) {}

  start(): WireEvent[] {
    const message = { ...this.message(), content: [] };
    return [event("message_start", { message }), event("ping", {})];
  }

  push(ev: AssistantEvent): WireEvent[] {
    switch (ev.type) {
      case "text":
      case "reasoning": {
        const kind = ev.type === "text" ? "text" : "thinking";
        const out = this.open?.kind === kind ? [] : this.begin({ kind, text: "" });
        this.open!.text += ev.text;
        const delta = kind === "text"
          ? { type: "text_delta", text: ev.text }
          : { type: "thinking_delta", thinking: ev.text };
        return [...out, event("content_block_delta", { index: this.blocks.length - 1, delta })];
      }
      case "tool_call": {
        const block: Block = { kind: "tool_use", text: "", id: toolUseId(ev.id), name: ev.name };
        const out = this.begin(block);
        this.calls.set(ev.index, { block, index: this.blocks.length - 1 });
        return out;
      }
      case "tool_arguments": {
        const call = this.calls.get(ev.index);
        if (!call) throw new Error(`arguments for tool call ${ev.index}, which never began`);
        call.block.text += ev.fragment;
        const delta = { type: "input_json_delta", partial_json: ev.fragment };
        return [event("content_block_delta", { index: call.index, delta })];
      }
    }
  }

  end(finish: CompleteFinish, completionTokens: number, stopSequence?: string): WireEvent[] {
    const out = this.close();
    // A stop string ends the turn as "stop"; Anthropic names it.
    const bySequence = finish === "stop" && stopSequence !== undefined;
    this.stopReason = bySequence ? "stop_sequence" : stopReasons[finish];
    this.stopSequence = bySequence ? stopSequence : null;
    this.outputTokens = completionTokens;
    const delta = { stop_reason: this.stopReason, stop_sequence: this.stopSequence };
    return [
      ...out,
      event("message_delta", { delta, usage: { output_tokens: completionTokens } }),
      event("message_stop", {}),
    ];
  }

  whole(): object {
    return this.message();
  }

  failed(err: ApiError): WireEvent {
    return { event: "error", data: anthropicError(err) };
  }

  private begin(block: Block): WireEvent[] {
    const out = this.close();
    this.open = block;
    this.blocks.push(block);
    const index = this.blocks.length - 1;
    const opening = block.kind === "tool_use"
      ? { type: "tool_use", id: block.id, name: block.name, input: {} }
      : wholeBlock(block);
    return [...out, event("content_block_start", { index, content_block: opening })];
  }

  private close(): WireEvent[] {
    if (!this.open) return [];
    this.open = null;
    return [event("content_block_stop", { index: this.blocks.length - 1 })];
  }

  private message() {
    return {
      id: this.head.id,
      type: "message",
      role: "assistant",
      model: this.head.model,
      content: this.blocks.map(wholeBlock),
      stop_reason: this.stopReason,
      stop_sequence: this.stopSequence,
      usage: { input_tokens: this.head.promptTokens, output_tokens: this.outputTokens },
    };
  }
}

function wholeBlock(b: Block): object {
  switch (b.kind) {
    case "text":
      return { type: "text", text: b.text };
    case "thinking":
      return { type: "thinking", thinking: b.text, signature: "" };
    case "tool_use":
      return { type: "tool_use", id: b.id, name: b.name, input: toolInput(b.text) };
  }
}

/** A call's arguments as the object Anthropic's `input` is; cut short (max_tokens), none. */
function toolInput(json: string): Record<string, unknown> {
  try {
    const value = JSON.parse(json || "{}");
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}

/** Anthropic's tool_use ids begin "toolu_"; a chat call id's own suffix is kept. */
const toolUseId = (callId: string) => "toolu_" + callId.replace(/^call_/, "");

function event(type: string, fields: object): WireEvent {
  return { event: type, data: { type, ...fields } };
}
