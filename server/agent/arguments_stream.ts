// Streams a tool call's arguments object as the model writes it (as vLLM does): each character is
// passed on once the scanner knows it continues a valid object. An object's ',' waits for the key
// after it, so that whatever was passed on can always be closed into valid JSON if the output stops.

import { JsonScanner } from "./json_scanner.ts";

export class ArgumentsStream {
  #scanner = new JsonScanner();
  #held = "";
  #started = false;

  /** Takes one character: the text now known to belong to the object, or null if it cannot. */
  push(ch: string): string | null {
    if (!this.#started) {
      this.#started = ch === "{";
      if (!this.#started) return null; // arguments are an object, from its first character
    }
    if (!this.#scanner.push(ch)) return null;
    if (this.#scanner.state === "key") {
      this.#held += ch;
      return "";
    }
    const text = this.#held + ch;
    this.#held = "";
    return text;
  }

  get started(): boolean {
    return this.#started;
  }

  get done(): boolean {
    return this.#scanner.state === "done";
  }

  /** The text that closes what was passed on into a valid object (the held comma is dropped). */
  close(): string {
    return this.#started ? this.#scanner.completion() : "{}";
  }
}
