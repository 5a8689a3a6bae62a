// Constrains a model's tool calls to its own syntax and to each tool's parameters schema, as an
// xgrammar structural tag: with tool_choice "auto" the text is free until the model writes a
// call's trigger (`<tool_call>`), and from there the call must be well formed; with "required" or
// a named function the answer must be calls. "none" constrains nothing: the tools are still shown
// to the model (OpenAI passes them), but the parser is told not to look for calls.

import type { GrammarSpec } from "../../runtime/service.ts";
import { allowedTools, argumentsSchema, type ToolChoice, type ToolDefinition } from "./tools.ts";
import type { ToolFormat } from "./tools.ts";

export interface ToolGrammarOptions {
  /**
   * The model thinks first (`<think>…</think>`): a forced call may only begin after its thinking.
   * `startsInReasoning`: the template already opened `<think>`.
   */
  reasoning?: { startsInReasoning: boolean };
}

/**
 * How each native format writes a call around its arguments object: alone (after its trigger,
 * when the model chooses to call), and in the list a forced answer is made of.
 */
const SYNTAX = {
  hermes: {
    trigger: "<tool_call>",
    begin: (name: string) => `<tool_call>\n{"name": ${name}, "arguments": `,
    end: "}\n</tool_call>",
    list: { open: "", separator: "\n", close: "" },
  },
  llama3: {
    trigger: '{"name": ',
    begin: (name: string) => `{"name": ${name}, "parameters": `,
    end: "}",
    list: { open: "", separator: "; ", close: "" },
  },
  // The array form (tokenizer v3); a call the model starts is an array of one.
  mistral: {
    trigger: "[TOOL_CALLS]",
    begin: (name: string) => `[TOOL_CALLS][{"name": ${name}, "arguments": `,
    end: "}]",
    list: {
      open: "[TOOL_CALLS][",
      separator: ", ",
      close: "]",
      begin: (name: string) => `{"name": ${name}, "arguments": `,
      end: "}",
    },
  },
};

/**
 * Most calls one generic-format answer may make when parallel calls are allowed: a bound, so that
 * any model, however poor, closes its list (the native formats' tag lists have no count).
 */
export const MAX_PARALLEL_CALLS = 8;

export function toolCallGrammar(
  format: ToolFormat,
  tools: ToolDefinition[],
  toolChoice: ToolChoice,
  parallel: boolean,
  options: ToolGrammarOptions = {},
): GrammarSpec | null {
  if (toolChoice === "none" || tools.length === 0) return null;
  const allowed = allowedTools(tools, toolChoice);
  const forced = toolChoice !== "auto";
  if (format === "generic") {
    const schema = genericSchema(allowed, forced, parallel);
    if (!options.reasoning) return { type: "json_schema", schema };
    return structuralTag(
      afterThinking(options.reasoning, { type: "json_schema", json_schema: schema }),
    );
  }
  const syntax = SYNTAX[format];
  const tags = (begin: (name: string) => string, end: string) =>
    allowed.map((tool) => ({
      type: "tag",
      begin: begin(JSON.stringify(tool.function.name)),
      content: { type: "json_schema", json_schema: argumentsSchema(tool) },
      end,
    }));
  // Free text (thinking included) until a trigger; one call then ends the answer unless parallel.
  if (!forced) {
    return structuralTag({
      type: "triggered_tags",
      triggers: [syntax.trigger],
      tags: tags(syntax.begin, syntax.end),
      stop_after_first: !parallel,
    });
  }
  const list = syntax.list;
  let calls: object = {
    type: "tags_with_separator",
    tags: "begin" in list ? tags(list.begin, list.end) : tags(syntax.begin, syntax.end),
    separator: list.separator,
    at_least_one: true,
    stop_after_first: !parallel,
  };
  // A list between brackets is a tag whose content is the calls (xgrammar refuses a sequence that
  // continues after tags_with_separator).
  if (list.open !== "") calls = { type: "tag", begin: list.open, content: calls, end: list.close };
  return structuralTag(options.reasoning ? afterThinking(options.reasoning, calls) : calls);
}

function structuralTag(format: object): GrammarSpec {
  return { type: "structural_tag", tag: { type: "structural_tag", format } };
}

/** Thinking of any text, then whitespace, then what must follow it. */
function afterThinking(reasoning: { startsInReasoning: boolean }, then: object): object {
  return {
    type: "sequence",
    elements: [
      {
        type: "tag",
        begin: reasoning.startsInReasoning ? "" : "<think>",
        content: { type: "any_text" },
        end: "</think>",
      },
      { type: "regex", pattern: "[ \\n\\t\\r]*" },
      then,
    ],
  };
}

/** The generic format's schema: tool calls of the allowed tools, or (unless forced) a response. */
function genericSchema(tools: ToolDefinition[], forced: boolean, parallel: boolean): object {
  const call = (tool: ToolDefinition) => ({
    type: "object",
    properties: { name: { const: tool.function.name }, arguments: argumentsSchema(tool) },
    required: ["name", "arguments"],
    additionalProperties: false,
  });
  const calls = {
    type: "object",
    properties: {
      tool_calls: {
        type: "array",
        items: { anyOf: tools.map(call) },
        minItems: 1,
        maxItems: parallel ? MAX_PARALLEL_CALLS : 1,
      },
    },
    required: ["tool_calls"],
    additionalProperties: false,
  };
  if (forced) return calls;
  const response = {
    type: "object",
    properties: { response: { type: "string" } },
    required: ["response"],
    additionalProperties: false,
  };
  return { anyOf: [calls, response] };
}
