// Separates a reasoning model's thinking from its answer: text inside `<think>…</think>` at the
// start of the turn is reasoning. When the chat template already opened `<think>` in the prompt
// (DeepSeek-R1, Qwen3 in thinking mode) the output starts inside it and only `</think>` appears.

import { partialMarkerLength } from "./held_marker.ts";

const OPEN = "<think>";
const CLOSE = "</think>";

export interface SplitText {
  reasoning: string;
  content: string;
}

export class ReasoningSplit {
  #where: "start" | "reasoning" | "content";
  #held = "";
  /** Whitespace right after a tag is dropped: it only separates the tag from what follows. */
  #trim = true;

  constructor(startsInReasoning: boolean) {
    this.#where = startsInReasoning ? "reasoning" : "start";
  }

  push(text: string): SplitText {
    const out: SplitText = { reasoning: "", content: "" };
    let rest = this.#held + text;
    this.#held = "";
    while (rest !== "") {
      if (this.#where === "start") {
        // Only a turn that begins with <think> (after whitespace) has reasoning.
        const head = rest.trimStart();
        if (head === "" || (OPEN.startsWith(head) && head !== OPEN)) {
          this.#held = rest;
          return out;
        }
        if (head.startsWith(OPEN)) {
          this.#where = "reasoning";
          rest = head.slice(OPEN.length);
        } else {
          this.#where = "content";
          this.#trim = false;
        }
        continue;
      }
      if (this.#trim) {
        rest = rest.trimStart();
        if (rest === "") return out;
        this.#trim = false;
      }
      if (this.#where === "content") {
        out.content += rest;
        return out;
      }
      const end = rest.indexOf(CLOSE);
      if (end >= 0) {
        out.reasoning += rest.slice(0, end);
        rest = rest.slice(end + CLOSE.length);
        this.#where = "content";
        this.#trim = true;
        continue;
      }
      const held = partialMarkerLength(rest, [CLOSE]);
      out.reasoning += rest.slice(0, rest.length - held);
      this.#held = rest.slice(rest.length - held);
      return out;
    }
    return out;
  }

  /** At the end of the output: what was held back (unfinished reasoning stays reasoning). */
  flush(): SplitText {
    const held = this.#held;
    this.#held = "";
    if (this.#where === "reasoning") return { reasoning: held, content: "" };
    return { reasoning: "", content: held };
  }
}
