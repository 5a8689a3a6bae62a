// The output constraint a request body asks for, in whichever dialect it speaks: OpenAI's
// `response_format`, vLLM's `guided_*` fields and their successor `structured_outputs`, and
// llama.cpp's `json_schema` and `grammar` fields. One body may ask for one constraint only.

import type { GrammarSpec } from "../../runtime/service.ts";

/** A body whose constraint is malformed or given twice; the route answers 400 with its message. */
export class GrammarRequestError extends Error {
  override name = "GrammarRequestError";
}

type Body = Record<string, unknown>;

/** The grammar the body asks for, or null when it asks for none. */
export function grammarFromBody(body: Body): GrammarSpec | null {
  const found: [string, GrammarSpec][] = [];
  const add = (field: string, spec: GrammarSpec | null) => {
    if (spec) found.push([field, spec]);
  };
  add("response_format", responseFormat(body.response_format));
  if (body.guided_json != null) add("guided_json", jsonSchema("guided_json", body.guided_json));
  if (body.guided_regex != null) add("guided_regex", regex("guided_regex", body.guided_regex));
  if (body.guided_choice != null) add("guided_choice", choice("guided_choice", body.guided_choice));
  if (body.guided_grammar != null) {
    add("guided_grammar", ebnf("guided_grammar", body.guided_grammar));
  }
  for (const [field, spec] of structuredOutputs(body.structured_outputs)) add(field, spec);
  if (body.json_schema != null) add("json_schema", jsonSchema("json_schema", body.json_schema));
  if (body.grammar != null) add("grammar", ebnf("grammar", body.grammar));
  if (found.length > 1) {
    const fields = found.map(([field]) => field).join(" and ");
    throw new GrammarRequestError(`only one output constraint may be given, not ${fields}`);
  }
  return found[0]?.[1] ?? null;
}

function responseFormat(format: unknown): GrammarSpec | null {
  if (format == null) return null;
  if (!isObject(format)) throw new GrammarRequestError("response_format must be an object");
  switch (format.type) {
    case "text":
      return null;
    case "json_object":
      // llama.cpp lets json_object carry a schema.
      return format.schema != null
        ? jsonSchema("response_format.schema", format.schema)
        : { type: "json_object" };
    case "json_schema": {
      const spec = format.json_schema;
      if (!isObject(spec) || spec.schema == null) {
        throw new GrammarRequestError("response_format.json_schema.schema is required");
      }
      const schema = jsonSchema("response_format.json_schema.schema", spec.schema);
      return typeof spec.strict === "boolean" ? { ...schema, strict: spec.strict } : schema;
    }
    default:
      throw new GrammarRequestError(
        `response_format.type must be "text", "json_object" or "json_schema", not ${
          JSON.stringify(format.type)
        }`,
      );
  }
}

/** vLLM's `structured_outputs`: one of json, regex, choice, grammar, json_object, structural_tag. */
function structuredOutputs(params: unknown): [string, GrammarSpec][] {
  if (params == null) return [];
  if (!isObject(params)) throw new GrammarRequestError("structured_outputs must be an object");
  const found: [string, GrammarSpec][] = [];
  const field = (name: string) => `structured_outputs.${name}`;
  if (params.json != null) found.push([field("json"), jsonSchema(field("json"), params.json)]);
  if (params.regex != null) found.push([field("regex"), regex(field("regex"), params.regex)]);
  if (params.choice != null) found.push([field("choice"), choice(field("choice"), params.choice)]);
  if (params.grammar != null) {
    found.push([field("grammar"), ebnf(field("grammar"), params.grammar)]);
  }
  if (params.json_object === true) found.push([field("json_object"), { type: "json_object" }]);
  if (params.structural_tag != null) {
    const tag = parseIfString(field("structural_tag"), params.structural_tag);
    if (!isObject(tag)) {
      throw new GrammarRequestError(`${field("structural_tag")} must be an object`);
    }
    found.push([field("structural_tag"), { type: "structural_tag", tag }]);
  }
  return found;
}

/** A JSON schema, given as an object (or a boolean schema), or as its JSON text. */
function jsonSchema(field: string, value: unknown): Extract<GrammarSpec, { type: "json_schema" }> {
  const schema = parseIfString(field, value);
  if (!isObject(schema) && typeof schema !== "boolean") {
    throw new GrammarRequestError(`${field} must be a JSON schema object`);
  }
  return { type: "json_schema", schema };
}

function regex(field: string, value: unknown): GrammarSpec {
  return { type: "regex", pattern: nonEmptyString(field, value) };
}

function ebnf(field: string, value: unknown): GrammarSpec {
  return { type: "ebnf", grammar: nonEmptyString(field, value) };
}

function choice(field: string, value: unknown): GrammarSpec {
  if (!Array.isArray(value) || value.length === 0 || !value.every((c) => typeof c === "string")) {
    throw new GrammarRequestError(`${field} must be a non-empty array of strings`);
  }
  return { type: "choice", choices: value };
}

function nonEmptyString(field: string, value: unknown): string {
  if (typeof value !== "string" || value === "") {
    throw new GrammarRequestError(`${field} must be a non-empty string`);
  }
  return value;
}

function parseIfString(field: string, value: unknown): unknown {
  if (typeof value !== "string") return value;
  try {
    return JSON.parse(value);
  } catch {
    throw new GrammarRequestError(`${field} is not valid JSON`);
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
