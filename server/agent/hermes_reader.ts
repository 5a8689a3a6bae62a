// Hermes-style calls (Hermes 2 Pro, Qwen2.5, Qwen3): each call is a JSON object between
// `<tool_call>` and `</tool_call>`, anywhere in the answer, as many as the model writes.

import { CallReaderBase } from "./call_reader.ts";
import type { CallObject } from "./call_object.ts";
import { partialMarkerLength } from "./held_marker.ts";

const OPEN = "<tool_call>";
const CLOSE = "</tool_call>";
const OPTIONS = { argumentKeys: ["arguments"], strict: false };

export class HermesReader extends CallReaderBase {
  #where: "text" | "call" | "closing" | "skipping" = "text";
  #held = ""; // text that may begin a marker
  #call: CallObject | null = null;
  #raw = ""; // the call's text so far, owed as text if it turns out not to be a call

  protected char(ch: string) {
    switch (this.#where) {
      case "text":
        return this.#textChar(ch);
      case "call":
        return this.#callChar(ch);
      case "closing":
        return this.#closingChar(ch);
      case "skipping":
        // The rest of a call whose arguments broke off: dropped up to its end tag.
        this.#held += ch;
        if (this.#held.endsWith(CLOSE)) this.#toText();
        else this.#held = this.#held.slice(-CLOSE.length);
    }
  }

  #textChar(ch: string) {
    this.#held += ch;
    if (this.#held.endsWith(OPEN)) {
      this.text(this.#held.slice(0, -OPEN.length));
      this.#held = "";
      this.#where = "call";
      this.#call = this.startCall(OPTIONS);
      this.#raw = OPEN;
      return;
    }
    const keep = partialMarkerLength(this.#held, [OPEN]);
    this.text(this.#held.slice(0, this.#held.length - keep));
    this.#held = this.#held.slice(this.#held.length - keep);
  }

  #callChar(ch: string) {
    const call = this.#call!;
    this.#raw += ch;
    const progress = this.feed(call, ch);
    if (progress === "done") {
      this.#where = "closing";
    } else if (progress === "error") {
      if (this.closeCall(call)) this.#where = "skipping";
      else {
        this.text(this.#raw); // not a call after all
        this.#toText();
      }
    }
  }

  #closingChar(ch: string) {
    // After the object: whitespace, then the end tag; a missing end tag is forgiven.
    this.#held += ch;
    const tag = this.#held.trimStart();
    if (tag === CLOSE) this.#toText();
    else if (!CLOSE.startsWith(tag)) {
      const rest = this.#held;
      this.#toText();
      for (const c of rest) this.#textChar(c);
    }
  }

  #toText() {
    this.#where = "text";
    this.#held = "";
    this.#call = null;
    this.#raw = "";
  }

  protected end() {
    if (this.#where === "text") this.text(this.#held);
    if (this.#where === "call" && !this.closeCall(this.#call!)) this.text(this.#raw);
    this.#toText();
  }
}
