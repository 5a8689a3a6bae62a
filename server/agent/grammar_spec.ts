// The constraint a request puts on its output, as the runtime's grammar-constrained sampler takes
// it. Kept identical to the runtime's own type (built beside this one), so specs pass through as is.

export type GrammarSpec =
  | { type: "json_object" }
  | { type: "json_schema"; schema: unknown; strict?: boolean }
  | { type: "ebnf"; grammar: string }
  | { type: "regex"; pattern: string }
  | { type: "choice"; choices: string[] }
  | { type: "structural_tag"; tag: unknown }; // the xgrammar structural tag object
