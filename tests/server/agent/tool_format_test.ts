import { assert, assertEquals, assertMatch } from "../../helpers/testing.ts";
import { chooseToolFormat, modelToolFormat } from "../../../server/agent/tool_format.ts";
import { genericToolPrompt } from "../../../server/agent/generic_tool_prompt.ts";
import type { ToolDefinition } from "../../../server/agent/tools.ts";

// Excerpts of real templates: the parts that tell the format.
const QWEN = '{%- if tools %}...<tools>{{ tool | tojson }}</tools>... <tool_call>\\n{"name": ' +
  '<function-name>, "arguments": <args-json-object>}\\n</tool_call>{%- endif %}';
const LLAMA31 = '{%- if tools is not none %}Respond in the format {"name": function name, ' +
  '"parameters": dictionary of argument name and its value}.{%- endif %}' +
  "{%- if message.tool_calls %}<|python_tag|>{%- endif %}";
const MISTRAL = "{%- if tools is not none %}[AVAILABLE_TOOLS]{{ tools|tojson }}[/AVAILABLE_TOOLS]" +
  "{%- endif %}{%- if message.tool_calls %}[TOOL_CALLS][{%- endif %}";
const PLAIN =
  "{% for message in messages %}<|im_start|>{{ message.role }}\\n{{ message.content }}" +
  "<|im_end|>\\n{% endfor %}";

Deno.test("tool format: read from the template's call syntax; no tools in it → generic", () => {
  assertEquals(chooseToolFormat(QWEN), "hermes");
  assertEquals(chooseToolFormat(LLAMA31), "llama3");
  assertEquals(chooseToolFormat(MISTRAL), "mistral");
  assertEquals(chooseToolFormat(PLAIN), "generic");
  assertEquals(chooseToolFormat(null), "generic");
  // A template that renders tools its own way: the tokenizer's special tokens tell.
  const own = "{%- if tools %}{{ tools | tojson }}{%- endif %}";
  assertEquals(chooseToolFormat(own, ["<s>", "[TOOL_CALLS]"]), "mistral");
  assertEquals(chooseToolFormat(own, ["<tool_call>"]), "hermes");
  assertEquals(chooseToolFormat(own, []), "generic");
  // Special tokens alone do not make a template without tools call in them.
  assertEquals(chooseToolFormat(PLAIN, ["<tool_call>"]), "generic");
  // Phi-4-mini's template shows tools only from a system message's own field, never the request's
  // tools, and defines no call syntax: the generic format and prompt.
  assertEquals(chooseToolFormat(PHI4_MINI), "generic");
});

const PHI4_MINI = "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in " +
  "message and message['tools'] is not none %}{{ '<|' + message['role'] + '|>' + " +
  "message['content'] + '<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}{% else %}" +
  "{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}{% endif %}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}";

const TOOLS: ToolDefinition[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Weather in a city",
      parameters: { type: "object", properties: { city: { type: "string" } } },
    },
  },
  { type: "function", function: { name: "now" } },
];

Deno.test("generic tool prompt: lists the schemas and asks for the generic format", () => {
  const auto = genericToolPrompt(TOOLS, "auto")!;
  assertMatch(auto, /"name": "get_weather"/);
  assertMatch(auto, /"description": "Weather in a city"/);
  assertMatch(auto, /"city": \{\s*"type": "string"/);
  assertMatch(auto, /\{"tool_calls": \[/);
  assertMatch(auto, /\{"response": /);
  const named = genericToolPrompt(TOOLS, { type: "function", function: { name: "now" } }, false)!;
  assert(!named.includes("get_weather"));
  assertMatch(named, /You must call the tool now/);
  assert(!named.includes('"response"'));
  assertEquals(genericToolPrompt(TOOLS, "none"), null);
});

Deno.test("tool format: read once per model, from the template that shows tools", () => {
  let reads = 0;
  const tokenizer = {
    chatTemplate: (withTools = false) => {
      reads++;
      return withTools ? QWEN : PLAIN;
    },
  };
  assertEquals(modelToolFormat(tokenizer), "hermes");
  assertEquals(modelToolFormat(tokenizer), "hermes");
  assertEquals(reads, 1);
});
