import { assertEquals, assertThrows } from "../../helpers/testing.ts";
import { grammarFromBody, GrammarRequestError } from "../../../server/agent/body_grammar.ts";

const SCHEMA = { type: "object", properties: { a: { type: "integer" } } };

Deno.test("body grammar: each dialect's field maps to one spec", () => {
  const cases: [Record<string, unknown>, unknown][] = [
    [{}, null],
    [{ response_format: { type: "text" } }, null],
    [{ response_format: { type: "json_object" } }, { type: "json_object" }],
    [
      {
        response_format: {
          type: "json_schema",
          json_schema: { name: "x", schema: SCHEMA, strict: true },
        },
      },
      { type: "json_schema", schema: SCHEMA, strict: true },
    ],
    [{ response_format: { type: "json_object", schema: SCHEMA } }, {
      type: "json_schema",
      schema: SCHEMA,
    }],
    [{ guided_json: SCHEMA }, { type: "json_schema", schema: SCHEMA }],
    [{ guided_json: JSON.stringify(SCHEMA) }, { type: "json_schema", schema: SCHEMA }],
    [{ guided_regex: "[a-z]+" }, { type: "regex", pattern: "[a-z]+" }],
    [{ guided_choice: ["yes", "no"] }, { type: "choice", choices: ["yes", "no"] }],
    [{ guided_grammar: 'root ::= "a"' }, { type: "ebnf", grammar: 'root ::= "a"' }],
    [{ structured_outputs: { json: SCHEMA } }, { type: "json_schema", schema: SCHEMA }],
    [{ structured_outputs: { regex: "\\d+" } }, { type: "regex", pattern: "\\d+" }],
    [{ structured_outputs: { choice: ["a"] } }, { type: "choice", choices: ["a"] }],
    [{ structured_outputs: { grammar: "root ::= x" } }, { type: "ebnf", grammar: "root ::= x" }],
    [{ structured_outputs: { json_object: true } }, { type: "json_object" }],
    [
      { structured_outputs: { structural_tag: '{"type": "structural_tag"}' } },
      { type: "structural_tag", tag: { type: "structural_tag" } },
    ],
    [{ json_schema: SCHEMA }, { type: "json_schema", schema: SCHEMA }],
    [{ grammar: 'root ::= "b"' }, { type: "ebnf", grammar: 'root ::= "b"' }],
    [{ guided_json: null, grammar: null }, null],
  ];
  for (const [body, spec] of cases) assertEquals(grammarFromBody(body), spec, JSON.stringify(body));
});

Deno.test("body grammar: two constraints, or malformed ones, are refused by name", () => {
  const refused: [Record<string, unknown>, RegExp][] = [
    [
      { response_format: { type: "json_object" }, guided_regex: "x" },
      /response_format and guided_regex/,
    ],
    [
      { structured_outputs: { json: SCHEMA, regex: "x" } },
      /structured_outputs.json and structured_outputs.regex/,
    ],
    [{ json_schema: SCHEMA, grammar: "root ::= x" }, /json_schema and grammar/],
    [{ response_format: { type: "xml" } }, /response_format.type/],
    [
      { response_format: { type: "json_schema", json_schema: { name: "x" } } },
      /schema is required/,
    ],
    [{ guided_choice: [] }, /guided_choice must be a non-empty array/],
    [{ guided_regex: 3 }, /guided_regex must be a non-empty string/],
    [{ guided_json: "{not json" }, /guided_json is not valid JSON/],
    [{ guided_json: [1] }, /guided_json must be a JSON schema object/],
  ];
  for (const [body, message] of refused) {
    assertThrows(() => grammarFromBody(body), (e: Error) => {
      return e instanceof GrammarRequestError && message.test(e.message);
    }, JSON.stringify(body));
  }
});
