// Checks JSON one character at a time, so a tool call's arguments can be streamed while the model
// writes them and still be known to be valid: the scanner says where in the grammar it stands, and
// what text would close what it has seen into a valid value (for calls cut off by a length limit).

type Container = "{" | "[";

/** Where the scanner stands: what it expects next. */
export type ScanState =
  | "value" // a value (after ':' or an array's ',', or at the start)
  | "objectFirst" // a key or '}' (after '{')
  | "arrayFirst" // a value or ']' (after '[')
  | "key" // a key (after an object's ',')
  | "colon"
  | "after" // ',' or a closer (after a value inside a container)
  | "string"
  | "number"
  | "literal"
  | "done"
  | "error";

const WHITESPACE = " \t\n\r";
const SIMPLE_ESCAPES = '"\\/bfnrt';
const HEX = "0123456789abcdefABCDEF";
const NUMBER_PREFIX = /^-?(?:(?:0|[1-9]\d*)(?:\.\d*)?(?:(?<=\d)[eE][+-]?\d*)?)?$/;
const NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

export class JsonScanner {
  #stack: Container[] = [];
  #state: ScanState = "value";
  #inKey = false;
  /** In a string: -1 outside an escape, 0 right after '\', 1..4 hex digits of \u expected next. */
  #escape = -1;
  #number = "";
  #literal = "";
  #literalAt = 0;

  get state(): ScanState {
    return this.#state;
  }

  /** How many containers are open. */
  get depth(): number {
    return this.#stack.length;
  }

  /** Takes one character; false (and state "error") when it cannot continue valid JSON. */
  push(ch: string): boolean {
    if (this.#state === "error") return false;
    if (this.#state === "number") {
      if (NUMBER_PREFIX.test(this.#number + ch)) {
        this.#number += ch;
        return true;
      }
      if (!this.finish()) return this.#fail();
      // The number ended at this character; it is read as what follows the number.
    }
    switch (this.#state) {
      case "string":
        return this.#stringChar(ch);
      case "literal":
        if (ch !== this.#literal[this.#literalAt]) return this.#fail();
        if (++this.#literalAt === this.#literal.length) this.#endValue();
        return true;
    }
    if (WHITESPACE.includes(ch)) return true;
    switch (this.#state) {
      case "value":
        return this.#startValue(ch);
      case "arrayFirst":
        return ch === "]" ? this.#close() : this.#startValue(ch);
      case "objectFirst":
        if (ch === "}") return this.#close();
        return ch === '"' ? this.#startString(true) : this.#fail();
      case "key":
        return ch === '"' ? this.#startString(true) : this.#fail();
      case "colon":
        if (ch !== ":") return this.#fail();
        this.#state = "value";
        return true;
      case "after": {
        const top = this.#stack[this.#stack.length - 1];
        if (ch === ",") {
          this.#state = top === "{" ? "key" : "value";
          return true;
        }
        return (ch === "}" && top === "{") || (ch === "]" && top === "[")
          ? this.#close()
          : this.#fail();
      }
      default: // "done": nothing may follow but whitespace
        return this.#fail();
    }
  }

  /**
   * Ends a number standing at the very end of the input (a top-level number only ends when
   * something follows it); false if the input so far is not one whole value or is still open.
   */
  finish(): boolean {
    if (this.#state === "number") {
      if (!NUMBER.test(this.#number)) return this.#fail();
      this.#endValue();
    }
    return this.#state === "done" || this.#state === "after";
  }

  /**
   * The shortest text that closes what was seen into a valid value: finishes an open string,
   * number or literal, gives a key without value `null`, and closes the open containers. In state
   * "key" (right after an object's ',') nothing valid can follow, so the caller must drop that
   * comma: the closers returned are those of the text before it.
   */
  completion(): string {
    let text = "";
    switch (this.#state) {
      case "string":
        if (this.#escape === 0) text += "\\";
        if (this.#escape > 0) text += "0".repeat(5 - this.#escape);
        text += '"';
        if (this.#inKey) text += ": null";
        break;
      case "number":
        if (!NUMBER.test(this.#number)) text += "0";
        break;
      case "literal":
        text += this.#literal.slice(this.#literalAt);
        break;
      case "colon":
        text += ": null";
        break;
      case "value":
        if (this.#stack.length > 0) text += "null";
        break;
    }
    for (let i = this.#stack.length - 1; i >= 0; i--) text += this.#stack[i] === "{" ? "}" : "]";
    return text;
  }

  #startValue(ch: string): boolean {
    if (ch === "{" || ch === "[") {
      this.#stack.push(ch);
      this.#state = ch === "{" ? "objectFirst" : "arrayFirst";
      return true;
    }
    if (ch === '"') return this.#startString(false);
    if (ch === "-" || (ch >= "0" && ch <= "9")) {
      this.#state = "number";
      this.#number = ch;
      return true;
    }
    const literal = ch === "t" ? "true" : ch === "f" ? "false" : ch === "n" ? "null" : null;
    if (literal === null) return this.#fail();
    this.#state = "literal";
    this.#literal = literal;
    this.#literalAt = 1;
    return true;
  }

  #startString(isKey: boolean): boolean {
    this.#state = "string";
    this.#inKey = isKey;
    this.#escape = -1;
    return true;
  }

  #stringChar(ch: string): boolean {
    if (this.#escape === 0) {
      if (ch === "u") this.#escape = 1;
      else if (SIMPLE_ESCAPES.includes(ch)) this.#escape = -1;
      else return this.#fail();
      return true;
    }
    if (this.#escape > 0) {
      if (!HEX.includes(ch)) return this.#fail();
      this.#escape = this.#escape === 4 ? -1 : this.#escape + 1;
      return true;
    }
    if (ch === "\\") this.#escape = 0;
    else if (ch === '"') {
      if (this.#inKey) this.#state = "colon";
      else this.#endValue();
    } else if (ch < " ") return this.#fail();
    return true;
  }

  #close(): boolean {
    this.#stack.pop();
    this.#endValue();
    return true;
  }

  #endValue() {
    this.#state = this.#stack.length === 0 ? "done" : "after";
  }

  #fail(): false {
    this.#state = "error";
    return false;
  }
}
