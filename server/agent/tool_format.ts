// Which syntax a model writes tool calls in, read from its chat template (the template shows the
// model its tools and how it was trained to call them) and its tokenizer's special tokens. A
// template that never uses `tools` gets Sluice's generic format and prompt instead.

import type { Tokenizer } from "../../runtime/service.ts";
import type { ToolFormat } from "./tools.ts";

const formats = new WeakMap<Pick<Tokenizer, "chatTemplate">, ToolFormat>();

/** The served model's tool format: read once from its template, which never changes. */
export function modelToolFormat(tokenizer: Pick<Tokenizer, "chatTemplate">): ToolFormat {
  let format = formats.get(tokenizer);
  if (format === undefined) {
    format = chooseToolFormat(tokenizer.chatTemplate(true));
    formats.set(tokenizer, format);
  }
  return format;
}

export function chooseToolFormat(
  template: string | null,
  specialTokens: readonly string[] = [],
): ToolFormat {
  const source = template ?? "";
  const has = (marker: string) => source.includes(marker) || specialTokens.includes(marker);
  if (source.includes("<tool_call>")) return "hermes";
  if (source.includes("[TOOL_CALLS]")) return "mistral";
  const usesTools = /\btools\b/.test(source);
  if (usesTools && (source.includes("<|python_tag|>") || /"parameters"/.test(source))) {
    return "llama3";
  }
  if (usesTools && has("<tool_call>")) return "hermes";
  if (usesTools && has("[TOOL_CALLS]")) return "mistral";
  return "generic";
}
