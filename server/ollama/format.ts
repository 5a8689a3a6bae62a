// Ollama's `format` as OpenAI's response_format, so both APIs reach the same grammar engine by the
// same road (agent/body_grammar.ts): "json" is any JSON object, a schema is that schema (strict, as
// Ollama holds the output to it), "" or none no constraint.

import type { OllamaChatRequest } from "./schema.ts";

export function responseFormat(format: OllamaChatRequest["format"]): object | undefined {
  if (format == null || format === "") return undefined;
  if (format === "json") return { type: "json_object" };
  return { type: "json_schema", json_schema: { name: "format", schema: format } };
}
