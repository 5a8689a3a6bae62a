// Llama 3.1/3.2 JSON tool calling: when the model calls, its whole answer is the call, a JSON
// object `{"name": "f", "parameters": {...}}` ("arguments" also seen), perhaps after
// `<|python_tag|>`, several separated by ';'. An answer that starts otherwise is text.

import type { CallObject } from "./call_object.ts";
import { CallReaderBase } from "./call_reader.ts";

const TAG = "<|python_tag|>";
// Strict: a JSON answer whose first object has other keys is an answer, not a call.
const OPTIONS = { argumentKeys: ["parameters", "arguments"], strict: true };

export class Llama3Reader extends CallReaderBase {
  #where: "start" | "text" | "object" | "between" | "next" | "skipping" = "start";
  #raw = ""; // text not yet given: owed as text if it is not a call
  #call: CallObject | null = null;

  protected char(ch: string) {
    const ws = ch.trim() === "";
    switch (this.#where) {
      case "start": {
        this.#raw += ch;
        const head = this.#raw.trimStart();
        const afterTag = head.startsWith(TAG) ? head.slice(TAG.length).trimStart() : head;
        if (afterTag === "" || (TAG.startsWith(head) && head !== TAG)) return;
        if (afterTag === "{") return this.#startObject(ch);
        this.#where = "text";
        return this.text(this.#raw);
      }
      case "text":
        return this.text(ch);
      case "object":
        this.#raw += ch;
        return this.#objectChar(ch);
      case "skipping":
        return; // the rest of a call whose arguments broke off
      case "between":
        if (ws) return;
        if (ch === ";") this.#where = "next";
        else { // text after the calls
          this.#where = "text";
          this.text(ch);
        }
        return;
      case "next":
        if (ws) return;
        this.#raw = ch;
        if (ch === "{") return this.#startObject(ch);
        this.#where = "text";
        this.text(ch);
    }
  }

  #startObject(ch: string) {
    this.#where = "object";
    this.#call = this.startCall(OPTIONS);
    this.#objectChar(ch);
  }

  #objectChar(ch: string) {
    const progress = this.feed(this.#call!, ch);
    if (progress === "done") {
      this.#where = "between";
      this.#raw = "";
    } else if (progress === "error") {
      if (this.closeCall(this.#call!)) this.#where = "skipping";
      else {
        this.#where = "text";
        this.text(this.#raw);
      }
    }
  }

  protected end() {
    if (this.#where === "start") this.text(this.#raw);
    if (this.#where === "object" && !this.closeCall(this.#call!)) this.text(this.#raw);
    this.#where = "skipping";
  }
}
