// Writes a turn as the Responses API answers it. Each run of assistant events of one kind is an
// output item: text a message (one output_text part), reasoning a reasoning item (one
// reasoning_text part), each tool call a function_call item. A stream opens with
// response.created and response.in_progress; an item opens with output_item.added (and its
// content_part.added), grows by deltas, and closes with its .done events when the next item begins
// or the turn ends; the stream closes with response.completed, or response.incomplete when the
// output hit its token limit. Every event has the next sequence_number. The JSON answer is the
// response object the last event carries.

import type { AssistantEvent } from "../agent/assistant_events.ts";
import type { CompleteFinish, TurnWriter, WireEvent } from "../agent/respond_turn.ts";
import type { ApiError } from "../openai/errors.ts";
import { type ResponseHead, responseObject, type ResponseStatus } from "./response.ts";

type ItemStatus = "in_progress" | "completed" | "incomplete";

/** An output item being written: its index in `output`, and how to close it. */
interface OpenItem {
  kind: "text" | "reasoning" | "tool";
  index: number;
  id: string;
  text: string;
  /** The tool call's name and call id. */
  name?: string;
  callId?: string;
}

const newId = (prefix: string) => prefix + crypto.randomUUID().replaceAll("-", "");

export class ResponsesWriter implements TurnWriter {
  private sequence = 0;
  private readonly output: object[] = [];
  private open: OpenItem | null = null;
  /** Tool calls' items by the call's index in the turn. */
  private readonly calls = new Map<number, OpenItem>();
  private final: object | null = null;

  constructor(private readonly head: ResponseHead) {}

  start(): WireEvent[] {
    const response = this.response("in_progress", null);
    return [
      this.event("response.created", { response }),
      this.event("response.in_progress", { response }),
    ];
  }

  push(ev: AssistantEvent): WireEvent[] {
    switch (ev.type) {
      case "text":
      case "reasoning": {
        const kind = ev.type;
        const out = this.open?.kind === kind ? [] : this.begin(kind);
        const item = this.open!;
        item.text += ev.text;
        const type = kind === "text"
          ? "response.output_text.delta"
          : "response.reasoning_text.delta";
        const logprobs = kind === "text" ? { logprobs: [] } : {};
        return [...out, this.event(type, { ...this.at(item), delta: ev.text, ...logprobs })];
      }
      case "tool_call": {
        const out = this.begin("tool", { name: ev.name, callId: ev.id });
        this.calls.set(ev.index, this.open!);
        return out;
      }
      case "tool_arguments": {
        const item = this.calls.get(ev.index);
        if (!item) throw new Error(`arguments for tool call ${ev.index}, which never began`);
        item.text += ev.fragment;
        return [
          this.event("response.function_call_arguments.delta", {
            item_id: item.id,
            output_index: item.index,
            delta: ev.fragment,
          }),
        ];
      }
    }
  }

  end(finish: CompleteFinish, completionTokens: number): WireEvent[] {
    // A limit reached mid-item leaves that item incomplete, as the response.
    const status: ResponseStatus = finish === "length" ? "incomplete" : "completed";
    const out = this.close(status);
    this.final = this.response(status, completionTokens);
    const type = status === "incomplete" ? "response.incomplete" : "response.completed";
    return [...out, this.event(type, { response: this.final })];
  }

  whole(): object {
    if (!this.final) throw new Error("whole() before end()");
    return this.final;
  }

  failed(err: ApiError): WireEvent {
    return this.event("error", { code: err.code, message: err.message, param: err.param });
  }

  /** Closes the open item and opens one of `kind`: its opening events. */
  private begin(kind: OpenItem["kind"], call?: { name: string; callId: string }): WireEvent[] {
    const out = this.close("completed");
    const prefix = kind === "text" ? "msg_" : kind === "reasoning" ? "rs_" : "fc_";
    const item: OpenItem = {
      kind,
      index: this.output.length,
      id: newId(prefix),
      text: "",
      ...call,
    };
    this.open = item;
    const added = this.item(item, "in_progress", false);
    this.output.push(added);
    out.push(this.event("response.output_item.added", { output_index: item.index, item: added }));
    if (kind !== "tool") {
      out.push(
        this.event("response.content_part.added", { ...this.at(item), part: part(kind, "") }),
      );
    }
    return out;
  }

  /** The open item's closing events; its whole form goes into `output`. */
  private close(status: ItemStatus): WireEvent[] {
    const item = this.open;
    if (!item) return [];
    this.open = null;
    const done = this.item(item, status, true);
    this.output[item.index] = done;
    const out: WireEvent[] = [];
    if (item.kind === "tool") {
      out.push(this.event("response.function_call_arguments.done", {
        item_id: item.id,
        output_index: item.index,
        arguments: item.text,
      }));
    } else {
      const textDone = item.kind === "text"
        ? this.event("response.output_text.done", {
          ...this.at(item),
          text: item.text,
          logprobs: [],
        })
        : this.event("response.reasoning_text.done", { ...this.at(item), text: item.text });
      out.push(
        textDone,
        this.event("response.content_part.done", {
          ...this.at(item),
          part: part(item.kind, item.text),
        }),
      );
    }
    out.push(this.event("response.output_item.done", { output_index: item.index, item: done }));
    return out;
  }

  /** An output item as the wire has it; `whole`: with its text (else as it opens, empty). */
  private item(item: OpenItem, status: ItemStatus, whole: boolean): object {
    const text = whole ? item.text : "";
    switch (item.kind) {
      case "text":
        return {
          type: "message",
          id: item.id,
          status,
          role: "assistant",
          content: whole ? [part("text", text)] : [],
        };
      case "reasoning":
        return {
          type: "reasoning",
          id: item.id,
          status,
          summary: [],
          content: whole ? [part("reasoning", text)] : [],
        };
      case "tool":
        return {
          type: "function_call",
          id: item.id,
          call_id: item.callId,
          name: item.name,
          arguments: text,
          status,
        };
    }
  }

  /** Where a content event points: its item, output index and (one) content part. */
  private at(item: OpenItem) {
    return { item_id: item.id, output_index: item.index, content_index: 0 };
  }

  private response(status: ResponseStatus, completionTokens: number | null) {
    return responseObject(this.head, status, [...this.output], completionTokens);
  }

  private event(type: string, fields: object): WireEvent {
    return { event: type, data: { type, sequence_number: this.sequence++, ...fields } };
  }
}

function part(kind: "text" | "reasoning", text: string): object {
  return kind === "text"
    ? { type: "output_text", text, annotations: [] }
    : { type: "reasoning_text", text };
}
