// What every format's reader shares: it takes the answer text (reasoning already split off) and
// gives text and tool-call events, numbering calls and giving each an id. Whitespace between text
// and a call, or between calls, is dropped: it belongs to the call syntax, not to the answer.

import type { AssistantEvent } from "./assistant_events.ts";
import { CallObject, type CallObjectOptions } from "./call_object.ts";

export interface CallReader {
  push(text: string): AssistantEvent[];
  flush(): AssistantEvent[];
  /** Whether a call was announced. */
  readonly called: boolean;
}

/** OpenAI's ids: "call_" and 24 random letters and digits. */
export function newCallId(): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return "call_" + Array.from(bytes, (b) => alphabet[b % alphabet.length]).join("");
}

export abstract class CallReaderBase implements CallReader {
  protected out: AssistantEvent[] = [];
  #calls = 0;
  #whitespace = "";

  constructor(private readonly newId: () => string = newCallId) {}

  get called(): boolean {
    return this.#calls > 0;
  }

  push(text: string): AssistantEvent[] {
    for (const ch of text) this.char(ch);
    return this.out.splice(0);
  }

  flush(): AssistantEvent[] {
    this.end();
    if (!this.called) this.#emit(this.#whitespace);
    this.#whitespace = "";
    return this.out.splice(0);
  }

  protected abstract char(ch: string): void;
  protected abstract end(): void;

  /** Answer text; trailing whitespace waits to see whether a call follows it. */
  protected text(text: string) {
    const kept = text.trimEnd();
    if (kept === "") {
      this.#whitespace += text;
      return;
    }
    this.#emit(this.#whitespace + text.slice(0, kept.length));
    this.#whitespace = text.slice(kept.length);
  }

  /** A call object begins (numbered after the calls announced so far). */
  protected startCall(options: CallObjectOptions): CallObject {
    return new CallObject(this.#calls, this.newId(), options);
  }

  /** Gives a character to a call, passing on its events; on "error" the caller owes its text. */
  protected feed(call: CallObject, ch: string): "more" | "done" | "error" {
    const progress = call.push(ch);
    this.#take(call.events.splice(0));
    return progress;
  }

  /** At the end of the output, closes an announced call's arguments; false if it was never one. */
  protected closeCall(call: CallObject): boolean {
    if (!call.announced) return false;
    const rest = call.close();
    if (rest !== "") {
      call.events.push({ type: "tool_arguments", index: call.index, fragment: rest });
    }
    this.#take(call.events.splice(0));
    return true;
  }

  /** Announces a call read by the format itself (not as a call object); returns its index. */
  protected announce(name: string): number {
    const index = this.#calls;
    this.#take([{ type: "tool_call", index, id: this.newId(), name }]);
    return index;
  }

  protected fragment(index: number, fragment: string) {
    if (fragment !== "") this.out.push({ type: "tool_arguments", index, fragment });
  }

  #take(events: AssistantEvent[]) {
    for (const event of events) {
      if (event.type === "tool_call") {
        this.#calls++;
        this.#whitespace = "";
      }
      this.out.push(event);
    }
  }

  #emit(text: string) {
    if (text !== "") this.out.push({ type: "text", text });
  }
}
