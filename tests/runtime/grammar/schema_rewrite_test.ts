// The schema rewrite against xgrammar itself: each rewritten schema is compiled to a grammar and
// every value's text over the range (and a margin past each end) is offered to it; what it
// accepts must be exactly what the original schema allows (numbers: a subset, never past a bound).

import type { Grammar } from "@mlc-ai/web-xgrammar";
import {
  JSON_TEXT_CHAR,
  rewriteSchema,
  rewriteStructuralTag,
} from "../../../runtime/grammar/schema_rewrite.ts";
import { loadXGrammar } from "../../../runtime/grammar/xgrammar.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

const xgr = await loadXGrammar();

/** The rewritten schema's grammar, compact as spec.ts compiles it. */
function grammarOf(schema: unknown): Promise<Grammar> {
  return xgr.Grammar.fromJSONSchema(JSON.stringify(rewriteSchema(schema)), false, -1, [",", ":"]);
}

/** The texts among `texts` whose acceptance by `schema`'s grammar differs from `expected`. */
async function mismatches(
  schema: unknown,
  texts: string[],
  expected: (text: string) => boolean,
): Promise<string[]> {
  const g = await grammarOf(schema);
  try {
    const wrong: string[] = [];
    for (const t of texts) {
      if ((await xgr.Testings.isGrammarAcceptString(g, t)) !== expected(t)) wrong.push(t);
    }
    return wrong;
  } finally {
    g.dispose();
  }
}

function span(from: number, to: number): string[] {
  return Array.from({ length: to - from + 1 }, (_, i) => String(from + i));
}

const INTEGERS: { schema: Record<string, unknown>; ok: (v: number) => boolean }[] = [
  { schema: { minimum: 0, maximum: 120 }, ok: (v) => v >= 0 && v <= 120 },
  { schema: { minimum: 7, maximum: 250 }, ok: (v) => v >= 7 && v <= 250 },
  { schema: { minimum: -120, maximum: -7 }, ok: (v) => v >= -120 && v <= -7 },
  { schema: { minimum: -250, maximum: 250 }, ok: (v) => v >= -250 && v <= 250 },
  { schema: { exclusiveMinimum: 3, exclusiveMaximum: 130 }, ok: (v) => v > 3 && v < 130 },
  { schema: { exclusiveMinimum: -130.5, maximum: -3.5 }, ok: (v) => v > -130.5 && v <= -3.5 },
  // Past the enum size: decimal blocks.
  { schema: { minimum: 0, maximum: 1000 }, ok: (v) => v >= 0 && v <= 1000 },
  { schema: { minimum: 7, maximum: 1190 }, ok: (v) => v >= 7 && v <= 1190 },
  { schema: { minimum: -1234, maximum: 560 }, ok: (v) => v >= -1234 && v <= 560 },
  { schema: { minimum: -2100, maximum: -120 }, ok: (v) => v >= -2100 && v <= -120 },
  // One end open.
  { schema: { minimum: 5 }, ok: (v) => v >= 5 },
  { schema: { minimum: 120 }, ok: (v) => v >= 120 },
  { schema: { minimum: -50 }, ok: (v) => v >= -50 },
  { schema: { maximum: 120 }, ok: (v) => v <= 120 },
  { schema: { maximum: -7 }, ok: (v) => v <= -7 },
  { schema: { exclusiveMaximum: -100 }, ok: (v) => v < -100 },
];

for (const { schema, ok } of INTEGERS) {
  Deno.test(`schema rewrite: integers ${JSON.stringify(schema)}, every value and a margin`, async () => {
    const ends = [schema.minimum, schema.maximum, schema.exclusiveMinimum, schema.exclusiveMaximum]
      .filter((b): b is number => typeof b === "number");
    const lo = Math.floor(Math.min(...ends));
    const hi = Math.ceil(Math.max(...ends));
    // Every value from 200 below the lowest bound to 200 above the highest, every 7th to 1100
    // past them (half-bounded ranges went wrong up to 999 off), and far ones. ("-0" is refused.)
    const far = span(lo - 1100, hi + 1100).filter((t) => Number(t) % 7 === 0);
    const texts = [...span(lo - 200, hi + 200), ...far, "-123456", "123456"];
    const wrong = await mismatches({ type: "integer", ...schema }, texts, (t) => ok(Number(t)));
    assertEquals(wrong, []);
  });
}

Deno.test("schema rewrite: bounded numbers never pass a bound", async () => {
  const cases: { schema: Record<string, unknown>; ok: (v: number) => boolean }[] = [
    { schema: { minimum: 0, maximum: 10 }, ok: (v) => v >= 0 && v <= 10 },
    { schema: { minimum: 0.5, maximum: 2.5 }, ok: (v) => v >= 0.5 && v <= 2.5 },
    { schema: { exclusiveMinimum: 0, exclusiveMaximum: 1 }, ok: (v) => v > 0 && v < 1 },
    { schema: { minimum: 0.25, maximum: 0.3 }, ok: (v) => v >= 0.25 && v <= 0.3 },
    { schema: { minimum: -10, maximum: -1 }, ok: (v) => v >= -10 && v <= -1 },
    { schema: { minimum: 0, maximum: 1000 }, ok: (v) => v >= 0 && v <= 1000 },
    { schema: { minimum: 0 }, ok: (v) => v >= 0 },
    { schema: { maximum: 10 }, ok: (v) => v <= 10 },
  ];
  for (const { schema, ok } of cases) {
    const g = await grammarOf({ type: "number", ...schema });
    try {
      const accepts = async (text: string) => {
        const yes = await xgr.Testings.isGrammarAcceptString(g, text);
        assert(!yes || ok(Number(text)), `${JSON.stringify(schema)} accepts ${text}`);
        return yes;
      };
      let accepted = 0;
      // Every hundredth from -12 to 12 (near the bounds above; also as xgrammar prints enum
      // decimals, 0.3 as 0.29999999999999999), every 7th integer to 1100.
      for (let k = -1200; k <= 1200; k++) {
        const v = k / 100;
        if (await accepts(String(v))) accepted++;
        if (!Number.isInteger(v) && await accepts(v.toPrecision(17))) accepted++;
      }
      for (let v = -1100; v <= 1100; v += 7) if (await accepts(String(v))) accepted++;
      for (const t of ["1e1", "10.5", "-10.5", "2.6", "0.0001", "0.25", "0.3"]) await accepts(t);
      assert(accepted > 0, `${JSON.stringify(schema)} accepts something`);
    } finally {
      g.dispose();
    }
  }
});

/** `s` as JSON source text, with nothing escaped but `"` and `\` (raw controls stay raw). */
function raw(s: string): string {
  return `"${s.replace(/["\\]/g, (c) => "\\" + c)}"`;
}

Deno.test("schema rewrite: bounded strings take no control character and keep their length", async () => {
  const schema = { type: "string", minLength: 2, maxLength: 5 };
  // Every ASCII character, in a string of a valid length.
  const ascii = Array.from({ length: 128 }, (_, c) => raw("a" + String.fromCharCode(c)));
  assertEquals(
    await mismatches(schema, ascii, (t) => {
      const c = t.charCodeAt(2);
      return c >= 0x20 && c < 0x7f && t[2] !== '"' && t[2] !== "\\";
    }),
    [],
  );
  const lengths = Array.from({ length: 8 }, (_, n) => raw("e".repeat(n)));
  assertEquals(
    await mismatches(schema, lengths, (t) => t.length - 2 >= 2 && t.length - 2 <= 5),
    [],
  );
  // Only ASCII: xgrammar counts a class's non-ASCII characters in bytes (and lets lone bytes by).
  const wide = [raw("ab"), raw("a\u00e9"), raw("a\u4e2d"), raw("a\u{1F600}"), raw("\u{10000}b")];
  assertEquals(await mismatches(schema, wide, (t) => /^[\x20-\x7e]*$/.test(t)), []);
  const open = Array.from({ length: 8 }, (_, n) => raw("x~".repeat(n)));
  assertEquals(await mismatches({ type: "string", minLength: 3 }, open, (t) => t.length >= 5), []);
  assertEquals(
    await mismatches(
      { type: "string", maxLength: 2 },
      [raw("\n"), raw("ab"), raw("abc")],
      (t) => t === raw("ab"),
    ),
    [],
  );
});

Deno.test("schema rewrite: reaches nested schemas, not enum values; leaves patterns alone", () => {
  const bounded = { type: "integer", minimum: 1, maximum: 3 };
  const out = rewriteSchema({
    type: "object",
    properties: { a: bounded, b: { type: "array", items: { anyOf: [bounded] } } },
    $defs: { c: { type: "string", maxLength: 2 } },
    enum: undefined,
  }) as any;
  const blocks = { anyOf: [{ type: "integer", minimum: 1, maximum: 3 }] };
  assertEquals(out.properties.a, blocks);
  assertEquals(out.properties.b.items.anyOf[0], blocks);
  assertEquals(out.$defs.c, { type: "string", pattern: `^${JSON_TEXT_CHAR}{0,2}$` });
  const kept = { type: "string", maxLength: 2, pattern: "^a+$" };
  assertEquals(rewriteSchema(kept), kept);
  const constant = { const: { type: "integer", minimum: 1, maximum: 3 } };
  assertEquals(rewriteSchema(constant), constant);
});

Deno.test("schema rewrite: a structural tag's JSON strings take no control character", async () => {
  const tag = rewriteStructuralTag({
    type: "structural_tag",
    format: {
      type: "tag",
      begin: "<call>",
      content: {
        type: "json_schema",
        json_schema: {
          type: "object",
          properties: {
            city: { type: "string", maxLength: 8 },
            days: { type: "integer", minimum: 1, maximum: 120 },
          },
          required: ["city", "days"],
          additionalProperties: false,
        },
      },
      end: "</call>",
    },
  }) as Record<string, unknown>;
  const g = await xgr.Grammar.fromStructuralTag(tag);
  try {
    const accepts = (s: string) => xgr.Testings.isGrammarAcceptString(g, s);
    assert(await accepts('<call>{"city": "Oslo", "days": 120}</call>'.replace(/: /g, ":")));
    assert(!(await accepts('<call>{"city":"O\u0001slo","days":12}</call>')));
    assert(!(await accepts('<call>{"city":"Oslo","days":121}</call>')));
  } finally {
    g.dispose();
  }
});
