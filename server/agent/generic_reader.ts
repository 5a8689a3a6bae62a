// Sluice's own format for models whose template knows no tools (generic_tool_prompt.ts asks for
// it, tool_call_grammar.ts can enforce it): the whole answer is one JSON object, either
// `{"tool_calls": [{"name": "f", "arguments": {...}}, ...]}` or `{"response": "the answer"}`.
// A response's string is decoded and streamed as text; an answer that is neither is text as is.

import type { CallObject } from "./call_object.ts";
import { CallReaderBase } from "./call_reader.ts";

const OPTIONS = { argumentKeys: ["arguments"], strict: false };

type Where =
  | "start"
  | "key" // the first key, read whole
  | "colon"
  | "value" // '"' for a response, '[' for calls
  | "response" // inside the response string
  | "item" // a call object or ']'
  | "object"
  | "itemAfter" // ',' or ']'
  | "tail" // the rest of the object, not read
  | "text"; // not the format: everything is text

export class GenericReader extends CallReaderBase {
  #where: Where = "start";
  #raw = ""; // owed as text until the format is certain
  #key = "";
  #escape = ""; // an escape sequence being read in the response
  #surrogate = ""; // a high surrogate waiting for its low half
  #call: CallObject | null = null;

  protected char(ch: string) {
    const ws = ch.trim() === "";
    if (this.#where !== "text" && this.#where !== "tail") this.#raw += ch;
    switch (this.#where) {
      case "start":
        if (ws) return;
        return ch === "{" ? this.#to("key") : this.#notFormat();
      case "key":
        if (ws && this.#key === "") return;
        this.#key += ch;
        if (!this.#key.startsWith('"')) return this.#notFormat();
        // Only the two keys are the format, and neither has an escape.
        if (this.#key.length > 1 && this.#key.endsWith('"')) {
          if (this.#key !== '"response"' && this.#key !== '"tool_calls"') return this.#notFormat();
          this.#to("colon");
        }
        return;
      case "colon":
        if (ws) return;
        return ch === ":" ? this.#to("value") : this.#notFormat();
      case "value":
        if (ws) return;
        if (this.#key === '"response"' && ch === '"') return this.#to("response");
        if (this.#key === '"tool_calls"' && ch === "[") return this.#to("item");
        return this.#notFormat();
      case "response":
        return this.#responseChar(ch);
      case "item":
        if (ws) return;
        if (ch === "]") return this.#to("tail");
        this.#call = this.startCall(OPTIONS);
        this.#where = "object";
        return this.#objectChar(ch);
      case "object":
        return this.#objectChar(ch);
      case "itemAfter":
        if (ws) return;
        if (ch === ",") return this.#to("item");
        if (ch === "]") return this.#to("tail");
        return this.#broken();
      case "tail":
        return;
      case "text":
        return this.text(ch);
    }
  }

  #to(where: Where) {
    this.#where = where;
  }

  #responseChar(ch: string) {
    if (this.#escape === "" && ch === '"') return this.#to("tail");
    if (this.#escape === "" && ch !== "\\") return this.#answer(ch);
    this.#escape += ch;
    const whole = this.#escape.length === 2 && this.#escape[1] !== "u" ||
      this.#escape.length === 6;
    if (!whole) return;
    let decoded: string;
    try {
      decoded = JSON.parse(`"${this.#escape}"`);
    } catch {
      decoded = this.#escape; // not a JSON escape: kept as written
    }
    this.#escape = "";
    const code = decoded.charCodeAt(0);
    if (decoded.length === 1 && code >= 0xd800 && code <= 0xdbff) this.#surrogate = decoded;
    else this.#answer(decoded);
  }

  #answer(text: string) {
    this.text(this.#surrogate + text);
    this.#surrogate = "";
    this.#raw = "";
  }

  #objectChar(ch: string) {
    const progress = this.feed(this.#call!, ch);
    if (progress === "done") this.#to("itemAfter");
    if (progress === "error") this.#broken();
  }

  /** The calls' syntax broke: close an announced call, else the answer is text after all. */
  #broken() {
    if (this.#call?.announced || this.called) {
      if (this.#call) this.closeCall(this.#call);
      return this.#to("tail");
    }
    this.#notFormat();
  }

  #notFormat() {
    this.#where = "text";
    this.text(this.#raw);
    this.#raw = "";
  }

  protected end() {
    if (this.#where === "object" || this.#where === "itemAfter") this.#broken();
    else if (this.#where === "response") this.#answer("");
    else if (this.#where !== "text" && this.#where !== "tail" && this.#where !== "item") {
      this.#notFormat();
    }
    this.#where = "tail";
  }
}
