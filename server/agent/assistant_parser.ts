// Reads a model's streamed answer into assistant events: reasoning split off first, then tool
// calls found in the model's own syntax. Fed the detokenized deltas in order, split anywhere; text
// that may begin a marker waits until the next delta decides, as stop strings do.

import type { AssistantEvent, ToolCall, TurnFinish } from "./assistant_events.ts";
import type { CallReader } from "./call_reader.ts";
import { newCallId } from "./call_reader.ts";
import { GenericReader } from "./generic_reader.ts";
import { HermesReader } from "./hermes_reader.ts";
import { Llama3Reader } from "./llama3_reader.ts";
import { MistralReader } from "./mistral_reader.ts";
import { ReasoningSplit, type SplitText } from "./reasoning_split.ts";
import type { ToolFormat } from "./tools.ts";

export interface AssistantParserOptions {
  format: ToolFormat;
  /** "split": `<think>…</think>` becomes reasoning events; "inline": it stays in the text. */
  reasoning: "split" | "inline";
  /** The prompt ends inside `<think>` (the template opened it), so the output starts there. */
  startsInReasoning?: boolean;
  /** Look for calls; without tools (or with tool_choice "none") all answer text is text. */
  toolsEnabled: boolean;
  /** Call ids (tests give fixed ones); OpenAI's "call_" and 24 random characters by default. */
  newId?: () => string;
}

const READERS: Record<ToolFormat, new (newId?: () => string) => CallReader> = {
  hermes: HermesReader,
  llama3: Llama3Reader,
  mistral: MistralReader,
  generic: GenericReader,
};

export class AssistantParser {
  #split: ReasoningSplit | null;
  #calls: CallReader | null;
  /** The whole calls, for answers that are not streamed. */
  readonly calls: ToolCall[] = [];

  constructor(options: AssistantParserOptions) {
    this.#split = options.reasoning === "split"
      ? new ReasoningSplit(options.startsInReasoning ?? false)
      : null;
    this.#calls = options.toolsEnabled
      ? new READERS[options.format](options.newId ?? newCallId)
      : null;
  }

  push(text: string): AssistantEvent[] {
    const split = this.#split ? this.#split.push(text) : { reasoning: "", content: text };
    return this.#events(split, this.#calls ? this.#calls.push(split.content) : null);
  }

  flush(): AssistantEvent[] {
    const split = this.#split ? this.#split.flush() : { reasoning: "", content: "" };
    if (!this.#calls) return this.#events(split, null);
    const answer = this.#calls.push(split.content);
    return this.#events({ reasoning: split.reasoning, content: "" }, [
      ...answer,
      ...this.#calls.flush(),
    ]);
  }

  /** Whether the model called a tool. */
  get called(): boolean {
    return this.#calls?.called ?? false;
  }

  /** The turn's finish reason: a turn that stopped after calling a tool finished in tool calls. */
  finish(runtime: TurnFinish): TurnFinish {
    return runtime === "stop" && this.called ? "tool_calls" : runtime;
  }

  #events(split: SplitText, answer: AssistantEvent[] | null): AssistantEvent[] {
    const events: AssistantEvent[] = [];
    if (split.reasoning !== "") events.push({ type: "reasoning", text: split.reasoning });
    if (answer === null) {
      if (split.content !== "") events.push({ type: "text", text: split.content });
    } else events.push(...answer);
    const merged = merge(events);
    for (const event of merged) this.#record(event);
    return merged;
  }

  #record(event: AssistantEvent) {
    if (event.type === "tool_call") {
      this.calls[event.index] = { id: event.id, name: event.name, arguments: "" };
    } else if (event.type === "tool_arguments") this.calls[event.index].arguments += event.fragment;
  }
}

/** Joins neighbouring events of one kind (and one call), so a delta gives few events. */
function merge(events: AssistantEvent[]): AssistantEvent[] {
  const out: AssistantEvent[] = [];
  for (const event of events) {
    const last = out[out.length - 1];
    if (last && event.type === last.type) {
      if (last.type === "text" || last.type === "reasoning") {
        last.text += (event as { text: string }).text;
        continue;
      }
      if (last.type === "tool_arguments" && last.index === (event as typeof last).index) {
        last.fragment += (event as typeof last).fragment;
        continue;
      }
    }
    out.push({ ...event });
  }
  return out;
}
