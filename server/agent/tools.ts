// The tools a chat request offers and how it lets the model use them, as OpenAI's chat completions
// body gives them. The parser, the grammar and the generic prompt all read these shapes.

export interface ToolFunction {
  name: string;
  description?: string;
  /** A JSON schema for the arguments object; absent means any object. */
  parameters?: Record<string, unknown>;
  strict?: boolean | null;
}

export interface ToolDefinition {
  type: "function";
  function: ToolFunction;
}

/** "none": no call; "auto": the model decides; "required": at least one call; or this function. */
export type ToolChoice =
  | "none"
  | "auto"
  | "required"
  | { type: "function"; function: { name: string } };

/** The native syntax a model writes its calls in (see tool_format.ts). */
export type ToolFormat = "hermes" | "llama3" | "mistral" | "generic";

/** The arguments' schema of a tool: its parameters, or any object when it declares none. */
export function argumentsSchema(tool: ToolDefinition): Record<string, unknown> {
  return tool.function.parameters ?? { type: "object" };
}

/** The tools a choice allows: all of them, or the one it names (an error when it is not offered). */
export function allowedTools(tools: ToolDefinition[], choice: ToolChoice): ToolDefinition[] {
  if (typeof choice === "string") return choice === "none" ? [] : tools;
  const named = tools.filter((t) => t.function.name === choice.function.name);
  if (named.length === 0) {
    throw new Error(`tool_choice names "${choice.function.name}", which is not among the tools`);
  }
  return named;
}
