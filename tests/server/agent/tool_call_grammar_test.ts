// The structural tags are checked with xgrammar itself (the web build the runtime uses), and what
// they accept is read back by the parser: grammar and parser agree on each format.

import { createRequire } from "node:module";
import { assert, assertEquals, assertThrows } from "../../helpers/testing.ts";
import { AssistantParser } from "../../../server/agent/assistant_parser.ts";
import { toolCallGrammar } from "../../../server/agent/tool_call_grammar.ts";
import type { ToolDefinition, ToolFormat } from "../../../server/agent/tools.ts";
import type { GrammarSpec } from "../../../runtime/service.ts";

// The web build expects CommonJS globals.
const g = globalThis as any;
g.require ??= createRequire(import.meta.url);
g.__filename ??= new URL(import.meta.url).pathname;
await import("@mlc-ai/web-xgrammar");
const xgr = g.xgrammar;

async function accepts(spec: GrammarSpec | null, text: string): Promise<boolean> {
  assert(spec !== null);
  const grammar = spec.type === "structural_tag"
    ? await xgr.Grammar.fromStructuralTag(spec.tag)
    : spec.type === "json_schema"
    ? await xgr.Grammar.fromJSONSchema(JSON.stringify(spec.schema))
    : null;
  return await xgr.Testings.isGrammarAcceptString(grammar, text);
}

const TOOLS: ToolDefinition[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: {
        type: "object",
        properties: { city: { type: "string" }, days: { type: "integer" } },
        required: ["city"],
        additionalProperties: false,
      },
    },
  },
  { type: "function", function: { name: "now" } }, // no parameters: any object
];

const GOOD: Record<ToolFormat, [string, string]> = {
  hermes: [
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>',
    '<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>',
  ],
  llama3: [
    '{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}',
    '{"name": "now", "parameters": {}}',
  ],
  mistral: [
    '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}]',
    '[TOOL_CALLS][{"name": "now", "arguments": {}}]',
  ],
  generic: [
    '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}]}',
    '{"tool_calls": [{"name": "now", "arguments": {}}]}',
  ],
};
/** Two calls as a forced, parallel answer writes them. */
const BOTH: Record<ToolFormat, string> = {
  hermes: GOOD.hermes.join("\n"),
  llama3: GOOD.llama3.join("; "),
  mistral: GOOD.mistral[0].slice(0, -1) + ", " + GOOD.mistral[1].slice("[TOOL_CALLS][".length),
  generic: "",
};

for (const format of ["hermes", "llama3", "mistral"] as const) {
  Deno.test(`tool grammar (${format}): auto, required, named, parallel`, async () => {
    const [weather, now] = GOOD[format];
    const auto = toolCallGrammar(format, TOOLS, "auto", false);
    assert(await accepts(auto, "It is sunny."));
    assert(await accepts(auto, "Let me look. " + weather));
    assert(!await accepts(auto, weather.replace('"Paris"', "42")), "arguments off schema");
    assert(!await accepts(auto, weather.replace("get_weather", "get_wether")), "unknown tool");
    assert(!await accepts(auto, BOTH[format]), "one call without parallel");
    assert(await accepts(toolCallGrammar(format, TOOLS, "auto", true), weather + now));

    const required = toolCallGrammar(format, TOOLS, "required", true);
    assert(await accepts(required, weather));
    assert(await accepts(required, BOTH[format]));
    assert(!await accepts(required, "It is sunny."));

    const named = toolCallGrammar(format, TOOLS, {
      type: "function",
      function: { name: "now" },
    }, false);
    assert(await accepts(named, now));
    assert(!await accepts(named, weather));

    // What the grammar lets through, the parser reads as the calls.
    const parser = new AssistantParser({ format, reasoning: "split", toolsEnabled: true });
    parser.push(BOTH[format]);
    parser.flush();
    assertEquals(parser.calls.map((c) => [c.name, JSON.parse(c.arguments)]), [
      ["get_weather", { city: "Paris", days: 2 }],
      ["now", {}],
    ]);
  });
}

Deno.test("tool grammar (generic): a JSON schema for calls or a response", async () => {
  const [weather, now] = GOOD.generic;
  const auto = toolCallGrammar("generic", TOOLS, "auto", true);
  assertEquals(auto?.type, "json_schema");
  assert(await accepts(auto, weather));
  assert(await accepts(auto, '{"response": "It is sunny."}'));
  assert(
    await accepts(auto, '{"tool_calls": [{"name": "now", "arguments": {}}, ' + weather.slice(16)),
  );
  assert(!await accepts(auto, "It is sunny."));
  const required = toolCallGrammar("generic", TOOLS, "required", false);
  assert(await accepts(required, now));
  assert(!await accepts(required, '{"response": "It is sunny."}'));
  assert(!await accepts(required, '{"tool_calls": []}'));
});

Deno.test("tool grammar: a forced call may follow the model's thinking", async () => {
  const [weather] = GOOD.hermes;
  const think = toolCallGrammar("hermes", TOOLS, "required", false, {
    reasoning: { startsInReasoning: false },
  });
  assert(await accepts(think, "<think>Paris, surely.</think>\n\n" + weather));
  assert(!await accepts(think, "<think>Paris.</think>\n\nSure! " + weather));
  const opened = toolCallGrammar("generic", TOOLS, "required", false, {
    reasoning: { startsInReasoning: true },
  });
  assert(await accepts(opened, "Paris.</think>\n" + GOOD.generic[1]));
});

Deno.test("tool grammar: none constrains nothing; a named tool must be offered", () => {
  assertEquals(toolCallGrammar("hermes", TOOLS, "none", true), null);
  assertEquals(toolCallGrammar("hermes", [], "auto", true), null);
  assertThrows(
    () => toolCallGrammar("hermes", TOOLS, { type: "function", function: { name: "x" } }, true),
    /not among the tools/,
  );
});
