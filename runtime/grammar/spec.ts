// What output a request is constrained to, as the server hands it over (its response_format or
// tools, mapped), and how each kind is compiled by xgrammar. JSON comes out compact (no whitespace
// between tokens of the grammar's own making): a model, however random, cannot spin on spaces and
// always has a way to close what it opened.

import type { CompiledGrammar, GrammarCompiler } from "@mlc-ai/web-xgrammar";
import { rewriteSchema, rewriteStructuralTag } from "./schema_rewrite.ts";
import { loadXGrammar } from "./xgrammar.ts";

export type GrammarSpec =
  /** Any JSON object. */
  | { type: "json_object" }
  /** JSON valid under `schema`; `strict` (default true): no property or item the schema omits. */
  | { type: "json_schema"; schema: unknown; strict?: boolean }
  /** xgrammar's EBNF (GBNF-style accepted), root rule "root". */
  | { type: "ebnf"; grammar: string }
  | { type: "regex"; pattern: string }
  /** Exactly one of `choices`. */
  | { type: "choice"; choices: string[] }
  /** xgrammar's structural tag ({type: "structural_tag", format}, or a format): tool calls. */
  | { type: "structural_tag"; tag: unknown };

/** Compact JSON: one line, "," and ":" with no spaces. */
const ONE_LINE = -1;
const COMPACT: [string, string] = [",", ":"];

/** The cache key of `spec`: equal for specs that compile to the same grammar. */
export function specKey(spec: GrammarSpec): string {
  return JSON.stringify(spec);
}

/** Compiles `spec`; throws (xgrammar's error, or a TypeError for a malformed spec) if it cannot. */
export function compileSpec(
  compiler: GrammarCompiler,
  spec: GrammarSpec,
): Promise<CompiledGrammar> {
  switch (spec.type) {
    case "json_object":
      return compiler.compileJSONSchema('{"type":"object"}', false, ONE_LINE, COMPACT, false);
    case "json_schema": {
      // Rewritten around xgrammar's bugs (schema_rewrite.ts); the cache key stays the request's.
      const schema = JSON.stringify(rewriteSchema(spec.schema));
      if (schema === undefined) throw new TypeError("the JSON schema is missing");
      return compiler.compileJSONSchema(schema, false, ONE_LINE, COMPACT, spec.strict ?? true);
    }
    case "ebnf":
      return compiler.compileGrammar(text(spec.grammar, "grammar"));
    case "regex":
      return compiler.compileStructuralTag({
        type: "structural_tag",
        format: { type: "regex", pattern: text(spec.pattern, "pattern") },
      });
    case "choice": {
      const { choices } = spec;
      if (!Array.isArray(choices) || choices.length === 0) {
        throw new TypeError("choices must be a non-empty list of strings");
      }
      const elements = choices.map((c) => ({ type: "const_string", value: text(c, "a choice") }));
      return compiler.compileStructuralTag({
        type: "structural_tag",
        format: { type: "or", elements },
      });
    }
    case "structural_tag":
      if (spec.tag === null || typeof spec.tag !== "object") {
        throw new TypeError("the structural tag must be an object");
      }
      return compileTag(compiler, rewriteStructuralTag(spec.tag) as Record<string, unknown>);
    default:
      throw new TypeError(`unknown grammar type ${(spec as { type: unknown }).type}`);
  }
}

/**
 * A structural tag with its JSON schemas as compact grammars: xgrammar writes a tag's json_schema
 * content with any whitespace between tokens, unbounded, so a random model could pad a tool call's
 * arguments forever; the same schema converted on its own honours the compact settings.
 */
async function compileTag(
  compiler: GrammarCompiler,
  tag: Record<string, unknown>,
): Promise<CompiledGrammar> {
  const xgr = await loadXGrammar();
  const compact = async (node: unknown): Promise<unknown> => {
    if (Array.isArray(node)) return await Promise.all(node.map(compact));
    if (node === null || typeof node !== "object") return node;
    const obj = node as Record<string, unknown>;
    if (obj.type === "json_schema" && "json_schema" in obj) {
      const schema = JSON.stringify(obj.json_schema);
      const grammar = await xgr.Testings._jsonSchemaToEBNF(schema, false, ONE_LINE, COMPACT, true);
      return { type: "grammar", grammar };
    }
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(obj)) out[k] = await compact(v);
    return out;
  };
  return compiler.compileStructuralTag(await compact(tag) as Record<string, unknown>);
}

function text(value: unknown, what: string): string {
  if (typeof value !== "string" || value === "") {
    throw new TypeError(`${what} must be a non-empty string`);
  }
  return value;
}
