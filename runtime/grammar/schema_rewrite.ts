// Rewrites a JSON schema, before xgrammar compiles it, around bugs of xgrammar 0.1.27's schema
// converter that let invalid answers through (found by probing its grammars; see
// tests/runtime/grammar/schema_rewrite_test.ts):
// - a string with minLength/maxLength becomes `[^"\\\r\n]{m,n}`, which admits raw control
//   characters (JSON forbids them) and broken UTF-8 (random bytes that decode to U+FFFD, each
//   then a character too many): it becomes a `pattern` of printable ASCII.
// - its integer ranges are wrong in many places (a maximum of 120 admits 121..129, a minimum of
//   5 admits 1..4, a negative minimum alone admits no negative number, a maximum of -100 alone
//   admits no number from -101 to -999): a bounded integer becomes an `anyOf` of decimal blocks
//   ([120, 129], [200, 999], …), which it gets right. (Not an `enum`: long ones go wrong too.)
// - its number ranges are wrong too (a maximum of 10 admits 10.5, exclusive bounds are ignored,
//   a fractional bound reads "." as any character): a bounded number becomes the integers in
//   range, or a few decimals when none is. A narrowing: every answer is valid, but fractions are
//   lost (xgrammar also prints enum decimals at 17 digits: 2.49 as 2.4900000000000002).
// Schemas are rewritten where they are schemas (properties, items, anyOf, $defs, …), never inside
// `enum`/`const` values. Anything else is passed through as it is.

/** How many decimals a number bounded between two integers is offered (a long enum of numbers
 * goes wrong in xgrammar: an alternation of 100 literals accepted "-1220" for "-120"). */
const FEW = 10;
/** The finest decimal precision such a number is enumerated at. */
const MAX_PLACES = 3;

type Schema = Record<string, unknown>;

/**
 * A regex class: a printable ASCII character of a JSON string's text that needs no escape. Only
 * ASCII: xgrammar 0.1.27 matches a class's non-ASCII ranges byte by byte (é counts as two, and
 * lone UTF-8 bytes pass), and reads a range reaching U+FFFF as any character at all.
 */
export const JSON_TEXT_CHAR = "[\\u0020-\\u0021\\u0023-\\u005b\\u005d-\\u007e]";

/** Keywords whose value is a schema. */
const ONE = [
  "items",
  "additionalItems",
  "additionalProperties",
  "unevaluatedItems",
  "unevaluatedProperties",
  "contains",
  "propertyNames",
  "not",
  "if",
  "then",
  "else",
];
/** Keywords whose value is a list of schemas. */
const LIST = ["anyOf", "oneOf", "allOf", "prefixItems", "items"];
/** Keywords whose value maps names to schemas. */
const MAP = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"];

/** `schema` with the rewrites above applied throughout; the input is not modified. */
export function rewriteSchema(schema: unknown): unknown {
  if (!isObject(schema)) return schema;
  const out: Schema = { ...schema };
  for (const k of ONE) if (isObject(out[k])) out[k] = rewriteSchema(out[k]);
  for (const k of LIST) {
    if (Array.isArray(out[k])) out[k] = (out[k] as unknown[]).map(rewriteSchema);
  }
  for (const k of MAP) {
    const m = out[k];
    if (isObject(m)) {
      out[k] = Object.fromEntries(Object.entries(m).map(([n, s]) => [n, rewriteSchema(s)]));
    }
  }
  // A schema that already enumerates or combines its values is left to that.
  if (["enum", "const", "anyOf", "oneOf", "allOf"].some((k) => k in out)) return out;
  switch (out.type) {
    case "string":
      return rewriteString(out);
    case "integer":
      return rewriteInteger(out);
    case "number":
      return rewriteNumber(out);
    default:
      return out;
  }
}

/** Rewrites the json_schema formats inside a structural tag (and its nested formats). */
export function rewriteStructuralTag(tag: unknown): unknown {
  if (Array.isArray(tag)) return tag.map(rewriteStructuralTag);
  if (!isObject(tag)) return tag;
  const out: Schema = {};
  for (const [k, v] of Object.entries(tag)) {
    out[k] = k === "json_schema" && tag.type === "json_schema"
      ? rewriteSchema(v)
      : rewriteStructuralTag(v);
  }
  return out;
}

function rewriteString(s: Schema): Schema {
  if (!("minLength" in s || "maxLength" in s) || "pattern" in s || "format" in s) return s;
  const { minLength, maxLength, ...rest } = s;
  const min = typeof minLength === "number" ? Math.max(0, Math.ceil(minLength)) : 0;
  const max = typeof maxLength === "number" ? Math.floor(maxLength) : undefined;
  // Printable ASCII but '"' and '\\': no control character, and one UTF-16 unit each, so every
  // validator counts the length the schema meant (a narrowing: no escapes, no non-ASCII text).
  return { ...rest, pattern: `^${JSON_TEXT_CHAR}{${min},${max ?? ""}}$` };
}

function rewriteInteger(s: Schema): Schema {
  const { lo, hi, rest } = bounds(s);
  if (lo === undefined && hi === undefined) return s;
  const { min, max } = integerBounds(lo, hi);
  // `type` goes with the bounds: the enum or anyOf says it all, and is left to itself.
  const { type: _, ...others } = rest;
  return { ...others, ...integerRange(min, max) };
}

function rewriteNumber(s: Schema): Schema {
  const { lo, hi, rest } = bounds(s);
  if (lo === undefined && hi === undefined) return s;
  const ints = rewriteInteger({ ...s, type: "integer" });
  const { min, max } = integerBounds(lo, hi);
  if (lo === undefined || hi === undefined || min! <= max!) return ints;
  // No integer in range: a few decimals at the coarsest precision that has one.
  const inRange = (v: number) =>
    (lo.strict ? v > lo.value : v >= lo.value) && (hi.strict ? v < hi.value : v <= hi.value);
  for (let places = 1; places <= MAX_PLACES; places++) {
    const scale = 10 ** places;
    const values: number[] = [];
    for (let k = Math.ceil(lo.value * scale); k / scale <= hi.value && values.length < FEW; k++) {
      const v = Number((k / scale).toFixed(places));
      if (inRange(v)) values.push(v);
    }
    const { type: _, ...others } = rest;
    if (values.length > 0) return { ...others, enum: values };
  }
  return ints;
}

/** The least and greatest integers within the bounds. */
function integerBounds(lo?: Bound, hi?: Bound): { min?: number; max?: number } {
  return {
    min: lo === undefined ? undefined : Math.ceil(lo.strict ? nextUp(lo.value) : lo.value),
    max: hi === undefined ? undefined : Math.floor(hi.strict ? nextDown(hi.value) : hi.value),
  };
}

interface Bound {
  value: number;
  strict: boolean;
}

/** The schema's bounds (draft 4's boolean exclusive* forms too) and its other keywords. */
function bounds(s: Schema): { lo?: Bound; hi?: Bound; rest: Schema } {
  const { minimum, maximum, exclusiveMinimum, exclusiveMaximum, ...rest } = s;
  const pick = (plain: unknown, exclusive: unknown, tighter: (a: number, b: number) => boolean) => {
    let b: Bound | undefined = typeof plain === "number"
      ? { value: plain, strict: exclusive === true }
      : undefined;
    if (typeof exclusive === "number" && (b === undefined || !tighter(b.value, exclusive))) {
      b = { value: exclusive, strict: true };
    }
    return b;
  };
  return {
    lo: pick(minimum, exclusiveMinimum, (a, b) => a > b),
    hi: pick(maximum, exclusiveMaximum, (a, b) => a < b),
    rest,
  };
}

/** Integers min..max (either end open) as an anyOf of blocks xgrammar compiles right. */
function integerRange(min: number | undefined, max: number | undefined): Schema {
  // An empty range: a schema nothing satisfies, which xgrammar reports as such.
  if (min !== undefined && max !== undefined && min > max) {
    return { type: "integer", minimum: 1, maximum: 0 };
  }
  const parts: Schema[] = [];
  if (min === undefined || min < 0) {
    // Negative side: blocks of |v|, mirrored.
    const top = max === undefined || max >= 0 ? 1 : -max;
    if (min !== undefined) parts.push(...magnitudes(top, -min).map(([a, b]) => block(-b, -a)));
    else {
      // xgrammar's `maximum: -10^d` alone admits -10^d and numbers of d + 2 digits or more: the
      // blocks cover the rest, up to d + 1 digits.
      const next = 10 ** String(top).length;
      parts.push(...magnitudes(top, next * 10 - 1).map(([a, b]) => block(-b, -a)));
      parts.push({ type: "integer", maximum: -next });
    }
  }
  if (max === undefined || max >= 0) {
    const bottom = min === undefined || min < 0 ? 0 : min;
    if (max !== undefined) parts.push(...magnitudes(bottom, max).map(([a, b]) => block(a, b)));
    else {
      // `minimum: 10^d` alone it gets right.
      const next = 10 ** String(bottom).length;
      parts.push(...magnitudes(bottom, next - 1).map(([a, b]) => block(a, b)));
      parts.push({ type: "integer", minimum: next });
    }
  }
  return { anyOf: parts };
}

function block(a: number, b: number): Schema {
  return a === b ? { const: a } : { type: "integer", minimum: a, maximum: b };
}

/** lo..hi (0 <= lo <= hi) as blocks: a shared prefix, a digit range, then free digits. */
function magnitudes(lo: number, hi: number): [number, number][] {
  const out: [number, number][] = [];
  let a = lo;
  while (a <= hi) {
    // The largest block from `a`: a multiple of 10^k, up to the next multiple of 10^(k+1).
    let step = 1;
    while (a % (step * 10) === 0 && a + step * 10 - 1 <= hi) step *= 10;
    let b = a + step - 1;
    const top = (Math.floor(a / (step * 10)) + 1) * step * 10 - 1;
    while (b + step <= Math.min(top, hi)) b += step;
    out.push([a, b]);
    a = b + 1;
  }
  return out;
}

function nextUp(v: number): number {
  return Number.isInteger(v) ? v + 1 : v;
}

function nextDown(v: number): number {
  return Number.isInteger(v) ? v - 1 : v;
}

function isObject(v: unknown): v is Schema {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}
