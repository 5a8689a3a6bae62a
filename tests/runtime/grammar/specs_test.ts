// Every kind of grammar, over the tiny models' real tokenizer and the fake engine's random model
// (its draws under a mask are uniform over what the mask allows): at temperature 1, over several
// seeds, the output must parse and meet its spec, and end with "stop" (the grammar complete), not
// at max_tokens. Every grammar bounds its strings and lists so that a random model closes them.

import type { GrammarSpec } from "../../../runtime/service.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { grammarRuntime, matcherCounts } from "./setup.ts";

const SEEDS = [1, 2, 3, 4, 5, 6];
const MAX_TOKENS = 1000;

const PERSON = {
  $defs: {
    tag: { type: "string", enum: ["red", "green", "blue"] },
    point: {
      type: "object",
      properties: {
        x: { type: "integer", minimum: -5, maximum: 5 },
        y: { type: "number", minimum: 0, maximum: 10 },
      },
      required: ["x", "y"],
      additionalProperties: false,
    },
  },
  type: "object",
  properties: {
    name: { type: "string", minLength: 2, maxLength: 6 },
    code: { type: "string", pattern: "^[A-Z]{2}[0-9]{1,3}$" },
    // xgrammar 0.1.27 alone lets 121..129 through a maximum of 120 (schema_rewrite.ts).
    age: { type: "integer", minimum: 0, maximum: 120 },
    score: { type: "integer", minimum: 7, maximum: 250 },
    debt: { type: "integer", exclusiveMinimum: -300, exclusiveMaximum: -99 },
    kind: { const: "person" },
    tags: { type: "array", items: { $ref: "#/$defs/tag" }, minItems: 1, maxItems: 3 },
    where: { $ref: "#/$defs/point" },
    extra: { anyOf: [{ type: "boolean" }, { type: "null" }, { type: "string", maxLength: 3 }] },
    nested: {
      type: "object",
      properties: {
        ok: { type: "boolean" },
        list: { type: "array", items: { type: "integer", minimum: 0, maximum: 9 }, maxItems: 2 },
      },
      required: ["ok"],
      additionalProperties: false,
    },
  },
  required: ["name", "code", "age", "kind", "tags", "where", "nested"],
  additionalProperties: false,
};

/**
 * A string's length is within min..max. A random model can emit byte sequences xgrammar takes for
 * characters and UTF-8 decoding does not (lone surrogates), which decode to several U+FFFD: such a
 * string's length cannot be read back, and only its other keywords are checked.
 */
function within(s: string, min: number, max: number): boolean {
  const n = [...s].length;
  return s.includes("\uFFFD") || (n >= min && n <= max);
}

/** Throws unless `v` is what PERSON describes (each check is one of the schema's keywords). */
function checkPerson(v: any): void {
  assert(typeof v === "object" && v !== null && !Array.isArray(v), "an object");
  const keys = ["name", "code", "age", "score", "debt", "kind", "tags", "where", "extra", "nested"];
  for (const k of Object.keys(v)) assert(keys.includes(k), `no additional property ${k}`);
  for (const k of PERSON.required) assert(k in v, `required ${k}`);
  assert(typeof v.name === "string" && within(v.name, 2, 6), "name length");
  assert(typeof v.code === "string" && /^[A-Z]{2}[0-9]{1,3}$/.test(v.code), "code pattern");
  assert(Number.isInteger(v.age) && v.age >= 0 && v.age <= 120, "age bounds");
  if ("score" in v) assert(Number.isInteger(v.score) && v.score >= 7 && v.score <= 250, "score");
  if ("debt" in v) assert(Number.isInteger(v.debt) && v.debt > -300 && v.debt < -99, "debt");
  assertEquals(v.kind, "person");
  assert(Array.isArray(v.tags) && v.tags.length >= 1 && v.tags.length <= 3, "tags size");
  for (const t of v.tags) assert(["red", "green", "blue"].includes(t), "tag enum");
  assertEquals(Object.keys(v.where).sort(), ["x", "y"]);
  assert(Number.isInteger(v.where.x) && v.where.x >= -5 && v.where.x <= 5, "x bounds");
  assert(typeof v.where.y === "number" && v.where.y >= 0 && v.where.y <= 10, "y bounds");
  if ("extra" in v) {
    const e = v.extra;
    assert(typeof e === "boolean" || e === null || (typeof e === "string" && within(e, 0, 3)));
  }
  assert(typeof v.nested.ok === "boolean", "nested.ok");
  for (const k of Object.keys(v.nested)) assert(["ok", "list"].includes(k), `nested ${k}`);
  if ("list" in v.nested) {
    assert(Array.isArray(v.nested.list) && v.nested.list.length <= 2, "list size");
    for (const n of v.nested.list) assert(Number.isInteger(n) && n >= 0 && n <= 9, "list item");
  }
}

const CALL = {
  type: "object",
  properties: {
    city: { type: "string", maxLength: 8 },
    days: { type: "integer", minimum: 1, maximum: 7 },
  },
  required: ["city", "days"],
  additionalProperties: false,
};

const CASES: { spec: GrammarSpec; check: (text: string) => void }[] = [
  {
    spec: { type: "json_object" },
    check: (text) => {
      const v = JSON.parse(text);
      assert(typeof v === "object" && v !== null && !Array.isArray(v), "an object");
    },
  },
  { spec: { type: "json_schema", schema: PERSON }, check: (text) => checkPerson(JSON.parse(text)) },
  {
    spec: {
      type: "ebnf",
      grammar: 'root ::= "(" item ("," item){0,3} ")"\nitem ::= [a-c]{1,3} | [0-9]',
    },
    check: (text) =>
      assert(/^\((?:[a-c]{1,3}|[0-9])(?:,(?:[a-c]{1,3}|[0-9])){0,3}\)$/.test(text), text),
  },
  {
    spec: { type: "regex", pattern: "[a-z]{1,6}@[a-z]{2,4}\\.(com|org)" },
    check: (text) => assert(/^[a-z]{1,6}@[a-z]{2,4}\.(com|org)$/.test(text), text),
  },
  {
    spec: { type: "choice", choices: ["yes", "no", "the river", "maybe not"] },
    check: (text) => assert(["yes", "no", "the river", "maybe not"].includes(text), text),
  },
  {
    spec: {
      type: "structural_tag",
      tag: {
        type: "structural_tag",
        format: {
          type: "tag",
          begin: "<call>",
          content: { type: "json_schema", json_schema: CALL },
          end: "</call>",
        },
      },
    },
    check: (text) => {
      const m = /^<call>(.*)<\/call>$/s.exec(text);
      assert(m, text);
      const v = JSON.parse(m[1]);
      assertEquals(Object.keys(v).sort(), ["city", "days"]);
      assert(typeof v.city === "string" && within(v.city, 0, 8));
      assert(Number.isInteger(v.days) && v.days >= 1 && v.days <= 7);
    },
  },
];

for (const { spec, check } of CASES) {
  Deno.test(`grammar: ${spec.type} output parses and meets its spec over ${SEEDS.length} seeds`, async () => {
    const counts = await matcherCounts();
    const { runtime, tokenizer } = await grammarRuntime();
    try {
      const grammar = await runtime.compileGrammar(spec);
      const prompt = tokenizer.encode("Answer: ");
      const outputs = await Promise.all(SEEDS.map(async (seed) => {
        const h = runtime.submit({
          ids: prompt,
          maxTokens: MAX_TOKENS,
          sampling: { temperature: 1, topK: 0, topP: 1, seed },
          grammar,
        });
        const ids: number[] = [];
        for await (const t of h.tokens) ids.push(t.id);
        return { ids, finish: await h.done };
      }));
      for (const { ids, finish } of outputs) {
        const text = tokenizer.decode(ids);
        assertEquals(
          finish.reason,
          "stop",
          `ended by ${finish.reason}: ${JSON.stringify(text.slice(0, 300))}`,
        );
        try {
          check(text);
        } catch (e) {
          throw new Error(`${JSON.stringify(text)}: ${(e as Error).message}`);
        }
      }
      // Random seeds make different outputs (the mask constrains, it does not decide).
      if (spec.type !== "choice") assert(new Set(outputs.map((o) => o.ids.join())).size > 1);
    } finally {
      await runtime.close();
    }
    assertEquals(counts.disposed, counts.made, "every matcher is disposed when its request ends");
  });
}
