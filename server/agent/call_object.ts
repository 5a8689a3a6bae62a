// Reads one call written as a JSON object, `{"name": "f", "arguments": {...}}`, a character at a
// time: the call is announced (id and name) once its name is known and its arguments begin, then
// its arguments stream as they come. Hermes, Llama 3, Mistral's array form and the generic format
// all write their calls this way; only the key naming the arguments differs.

import type { AssistantEvent } from "./assistant_events.ts";
import { ArgumentsStream } from "./arguments_stream.ts";
import { JsonScanner } from "./json_scanner.ts";

export interface CallObjectOptions {
  /** Keys that hold the arguments ("arguments"; Llama 3 writes "parameters"). */
  argumentKeys: readonly string[];
  /**
   * Refuse an object with other keys before the call is announced (only "type" is allowed), so
   * that a JSON answer such as `{"name": "Ada", "age": 36}` is not taken for a call.
   */
  strict: boolean;
}

type Step = "start" | "keyOrEnd" | "key" | "inKey" | "colon" | "value" | "inValue" | "after";
export type CallProgress = "more" | "done" | "error";

export class CallObject {
  /** Events produced so far; the caller takes them. */
  readonly events: AssistantEvent[] = [];
  #step: Step = "start";
  #scanner = new JsonScanner(); // the current key or value
  #raw = ""; // the current key's or value's text
  #field: "name" | "arguments" | "other" = "other";
  #name: string | null = null;
  #args: ArgumentsStream | null = null;
  #argsDone = false;
  #pendingArgs = ""; // arguments written before the name
  #announced = false;

  constructor(
    readonly index: number,
    readonly id: string,
    readonly options: CallObjectOptions,
  ) {}

  /** Whether the call was announced (events were given that cannot be taken back). */
  get announced(): boolean {
    return this.#announced;
  }

  push(ch: string): CallProgress {
    const ws = ch === " " || ch === "\n" || ch === "\t" || ch === "\r";
    switch (this.#step) {
      case "start":
        if (ws) return "more";
        return ch === "{" ? this.#to("keyOrEnd") : "error";
      case "keyOrEnd":
        if (ws) return "more";
        if (ch === "}") return this.#end();
        return ch === '"' ? this.#startKey() : "error";
      case "key":
        if (ws) return "more";
        return ch === '"' ? this.#startKey() : "error";
      case "inKey":
        this.#raw += ch;
        if (!this.#scanner.push(ch)) return "error";
        return this.#scanner.state === "done" ? this.#keyRead() : "more";
      case "colon":
        if (ws) return "more";
        return ch === ":" ? this.#to("value") : "error";
      case "value":
        if (ws) return "more";
        this.#step = "inValue";
        this.#scanner = new JsonScanner();
        this.#raw = "";
        if (this.#field === "arguments" && ch === "{") this.#args = new ArgumentsStream();
        return this.#valueChar(ch);
      case "inValue":
        return this.#valueChar(ch);
      case "after":
        if (ws) return "more";
        if (ch === "}") return this.#end();
        return ch === "," ? this.#to("key") : "error";
    }
  }

  /** At the end of the output: the text that makes announced arguments valid JSON, if any. */
  close(): string {
    if (!this.#announced || this.#argsDone) return "";
    return this.#args ? this.#args.close() : "{}";
  }

  #to(step: Step): CallProgress {
    this.#step = step;
    return "more";
  }

  #startKey(): CallProgress {
    this.#scanner = new JsonScanner();
    this.#scanner.push('"');
    this.#raw = '"';
    return this.#to("inKey");
  }

  #keyRead(): CallProgress {
    const key = JSON.parse(this.#raw) as string;
    this.#field = key === "name"
      ? "name"
      : this.options.argumentKeys.includes(key)
      ? "arguments"
      : "other";
    if (this.#field === "other" && this.options.strict && !this.#announced && key !== "type") {
      return "error";
    }
    if (this.#field === "name" && this.#name !== null) return "error";
    if (this.#field === "arguments" && (this.#args !== null || this.#argsDone)) return "error";
    return this.#to("colon");
  }

  #valueChar(ch: string): CallProgress {
    if (!this.#scanner.push(ch)) {
      // A number ends only at the character after it: end it, then read that character.
      if (!this.#scanner.finish()) return "error";
      this.#step = "after";
      const progress = this.#valueRead();
      return progress === "error" ? progress : this.push(ch);
    }
    this.#raw += ch;
    if (this.#args && !this.#argsDone) {
      const text = this.#args.push(ch);
      if (text === null) return "error";
      this.#giveArgs(text);
    }
    if (this.#scanner.state !== "done") return "more";
    this.#step = "after";
    return this.#valueRead();
  }

  #valueRead(): CallProgress {
    const raw = this.#raw;
    if (this.#field === "name") {
      const name = JSON.parse(raw);
      if (typeof name !== "string" || name === "") return "error";
      this.#name = name;
      // Announce as soon as the arguments have begun (or on their own key, if they come first).
      if (this.#args || this.#argsDone) this.#announce();
    } else if (this.#field === "arguments") {
      if (!this.#args) this.#giveArgs(normalizeArguments(raw));
      this.#argsDone = true;
    }
    return "more";
  }

  #giveArgs(text: string) {
    if (!this.#announced && this.#name !== null) this.#announce();
    if (!this.#announced) this.#pendingArgs += text;
    else if (text !== "") {
      this.events.push({ type: "tool_arguments", index: this.index, fragment: text });
    }
  }

  #announce() {
    this.#announced = true;
    this.events.push({ type: "tool_call", index: this.index, id: this.id, name: this.#name! });
    const pending = this.#pendingArgs;
    this.#pendingArgs = "";
    if (pending !== "") this.#giveArgs(pending);
  }

  #end(): CallProgress {
    if (this.#name === null) return "error";
    if (!this.#announced) this.#announce();
    if (!this.#args && !this.#argsDone) this.#giveArgs("{}");
    this.#argsDone = true;
    return "done";
  }
}

/**
 * Arguments not written as an object: some models write them as a string holding the object's
 * JSON; that string's content is taken when it is an object, and anything else (null) is `{}`.
 */
export function normalizeArguments(raw: string): string {
  const value = JSON.parse(raw);
  if (typeof value === "string") {
    try {
      const inner = JSON.parse(value);
      if (inner !== null && typeof inner === "object" && !Array.isArray(inner)) {
        return JSON.stringify(inner);
      }
    } catch {
      // not JSON inside: no arguments to give
    }
  }
  return "{}";
}
