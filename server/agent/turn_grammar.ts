// The grammar a chat turn is decoded under, compiled by the runtime: the output constraint the
// body asks for (response_format or an extension, body_grammar.ts), or the tool-call grammar of
// its tools (tool_call_grammar.ts: "required" and a named function force calls; "auto" leaves free
// text until the model opens a call, then holds the call to its tool's schema). A body may not
// have both: a JSON answer and a call are two different turns, and no client expects calls inside
// its schema, so tools with an output constraint are refused unless tool_choice is "none".

import type { CompiledGrammarHandle, Runtime } from "../../runtime/service.ts";
import { InvalidRequest } from "../../runtime/service.ts";
import { ApiError } from "../openai/errors.ts";
import type { ChatRequest } from "../openai/schemas.ts";
import { grammarFromBody, GrammarRequestError } from "./body_grammar.ts";
import { toolDefinitions } from "./chat_prompt.ts";
import type { GrammarSpec } from "../../runtime/service.ts";
import { toolCallGrammar } from "./tool_call_grammar.ts";
import type { ToolFormat } from "./tools.ts";

export async function turnGrammar(
  runtime: Runtime,
  body: ChatRequest,
  format: ToolFormat,
  startsInReasoning: boolean,
): Promise<CompiledGrammarHandle | undefined> {
  const output = bodyGrammar(body);
  const tools = body.tools ?? [];
  const choice = body.tool_choice ?? "auto";
  const calls = tools.length && choice !== "none"
    ? toolCallGrammar(
      format,
      toolDefinitions(tools),
      choice,
      body.parallel_tool_calls ?? true,
      // A template that opened <think> must let the model close it before any call.
      startsInReasoning ? { reasoning: { startsInReasoning } } : {},
    )
    : null;
  if (output && calls) {
    throw new ApiError(
      400,
      'response_format (or another output constraint) cannot be combined with tools unless tool_choice is "none"',
      "response_format",
      "invalid_value",
    );
  }
  const spec = output ?? calls;
  if (!spec) return undefined;
  try {
    return await runtime.compileGrammar(spec);
  } catch (err) {
    if (!(err instanceof InvalidRequest)) throw err;
    const param = output ? err.param ?? "response_format" : "tools";
    throw new ApiError(400, err.message, param, err.code);
  }
}

function bodyGrammar(body: ChatRequest): GrammarSpec | null {
  try {
    return grammarFromBody(body as Record<string, unknown>);
  } catch (err) {
    if (!(err instanceof GrammarRequestError)) throw err;
    throw new ApiError(400, err.message, faultyField(err.message), "invalid_value");
  }
}

const CONSTRAINT_FIELDS = [
  "response_format",
  "structured_outputs",
  "guided_json",
  "guided_regex",
  "guided_choice",
  "guided_grammar",
  "json_schema",
  "grammar",
];

/** The constraint field a refusal names first. */
function faultyField(message: string): string {
  const named = CONSTRAINT_FIELDS.map((f) =>
    [f, new RegExp(`\\b${f}\\b`).exec(message)?.index ?? -1] as const
  )
    .filter(([, at]) => at >= 0).sort((a, b) => a[1] - b[1]);
  return named[0]?.[0] ?? "response_format";
}
