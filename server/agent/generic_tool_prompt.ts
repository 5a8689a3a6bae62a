// The system text that offers tools to a model whose chat template cannot: it lists each tool's
// JSON schema and asks for the generic format generic_reader.ts reads (one JSON object, either
// tool calls or a response), which tool_call_grammar.ts can also enforce. With tool_choice "none"
// there is no prompt: the format would make every answer JSON, and no call may be made anyway.

import { allowedTools, argumentsSchema, type ToolChoice, type ToolDefinition } from "./tools.ts";

export function genericToolPrompt(
  tools: ToolDefinition[],
  toolChoice: ToolChoice = "auto",
  parallel = true,
): string | null {
  if (toolChoice === "none") return null;
  const offered = allowedTools(tools, toolChoice).map((tool) => ({
    name: tool.function.name,
    ...(tool.function.description ? { description: tool.function.description } : {}),
    parameters: argumentsSchema(tool),
  }));
  const calls = parallel ? "one or more tools" : "one tool";
  const callForm = '{"tool_calls": [{"name": "<tool name>", "arguments": {<its arguments>}}]}';
  const lines = [
    "You can call these tools (each with a JSON schema for its arguments):",
    JSON.stringify(offered, null, 2),
    "",
    "Answer with one JSON object and nothing else.",
  ];
  if (toolChoice === "auto") {
    lines.push(
      `To call ${calls}: ${callForm}`,
      'To answer directly: {"response": "<your answer>"}',
    );
  } else {
    const which = typeof toolChoice === "object" ? `the tool ${toolChoice.function.name}` : calls;
    lines.push(`You must call ${which}: ${callForm}`);
  }
  return lines.join("\n");
}
