// Mistral's calls follow the `[TOOL_CALLS]` token, in one of two forms: a JSON array of call
// objects (`[TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]`, tokenizer v3), or, from
// tokenizer v11 on, the name then `[ARGS]` then the arguments object, the marker repeated per call.

import { ArgumentsStream } from "./arguments_stream.ts";
import type { CallObject } from "./call_object.ts";
import { CallReaderBase } from "./call_reader.ts";
import { partialMarkerLength } from "./held_marker.ts";

const OPEN = "[TOOL_CALLS]";
const ARGS = "[ARGS]";
const OPTIONS = { argumentKeys: ["arguments"], strict: false };
const NAME = /^[A-Za-z0-9_.\-]*$/;

type Where =
  | "text"
  | "opened" // after [TOOL_CALLS]: '[' or a name
  | "arrayItem" // in the array: a call object or ']'
  | "object" // in a call object
  | "arrayAfter" // ',' or ']'
  | "name" // the v11 form's name, up to [ARGS]
  | "arguments"; // the v11 form's arguments object

export class MistralReader extends CallReaderBase {
  #where: Where = "text";
  #held = "";
  #raw = "";
  #call: CallObject | null = null;
  #args: ArgumentsStream | null = null;
  #index = 0;

  protected char(ch: string) {
    const ws = ch.trim() === "";
    if (this.#where !== "text") this.#raw += ch;
    switch (this.#where) {
      case "text":
        return this.#textChar(ch);
      case "opened":
        if (ws) return;
        if (ch === "[") this.#where = "arrayItem";
        else this.#nameChar(ch);
        return;
      case "arrayItem":
        if (ws) return;
        if (ch === "]") return this.#toText();
        this.#call = this.startCall(OPTIONS);
        this.#where = "object";
        return this.#objectChar(ch);
      case "object":
        return this.#objectChar(ch);
      case "arrayAfter":
        if (ws) return;
        if (ch === ",") this.#where = "arrayItem";
        else if (ch === "]") this.#toText();
        else this.#fail();
        return;
      case "name":
        return this.#nameChar(ch);
      case "arguments":
        return this.#argumentsChar(ch);
    }
  }

  #textChar(ch: string) {
    this.#held += ch;
    if (this.#held.endsWith(OPEN)) {
      this.text(this.#held.slice(0, -OPEN.length));
      this.#held = "";
      this.#raw = OPEN;
      this.#where = "opened";
      return;
    }
    const keep = partialMarkerLength(this.#held, [OPEN]);
    this.text(this.#held.slice(0, this.#held.length - keep));
    this.#held = this.#held.slice(this.#held.length - keep);
  }

  #objectChar(ch: string) {
    const progress = this.feed(this.#call!, ch);
    if (progress === "done") this.#where = "arrayAfter";
    if (progress === "error") this.#fail();
  }

  #nameChar(ch: string) {
    this.#where = "name";
    this.#held += ch;
    if (this.#held.endsWith(ARGS) && this.#held.length > ARGS.length) {
      const name = this.#held.slice(0, -ARGS.length);
      this.#held = "";
      this.#where = "arguments";
      this.#args = new ArgumentsStream();
      this.#index = this.announce(name);
      return;
    }
    const keep = partialMarkerLength(this.#held, [ARGS]);
    if (!NAME.test(this.#held.slice(0, this.#held.length - keep))) this.#fail();
  }

  #argumentsChar(ch: string) {
    if (ch.trim() === "" && !this.#args!.started) return; // before the object
    const text = this.#args!.push(ch);
    if (text === null) return this.#fail();
    this.fragment(this.#index, text);
    if (this.#args!.done) this.#toText();
  }

  /** Not a call after all, or a call broken off: its text is answer text, or its arguments close. */
  #fail() {
    if (this.#where === "arguments") this.#closeArguments();
    else if (!(this.#call && this.closeCall(this.#call))) this.text(this.#raw);
    this.#toText();
  }

  #closeArguments() {
    this.fragment(this.#index, this.#args!.close());
  }

  #toText() {
    this.#where = "text";
    this.#held = "";
    this.#raw = "";
    this.#call = null;
    this.#args = null;
  }

  protected end() {
    if (this.#where === "text") this.text(this.#held);
    else this.#fail();
  }
}
