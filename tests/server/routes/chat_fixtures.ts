// What the chat agent tests share: a template with Hermes tool markup, and a tool.

/** A Qwen-2.5-like template: tools in <tools>, calls in <tool_call>, results in <tool_response>. */
export const HERMES_TEMPLATE =
  "{%- if tools %}<|im_start|>system\nYou may call functions.\n<tools>\n" +
  "{%- for tool in tools %}{{ tool | tojson }}\n{%- endfor %}</tools>\n" +
  'Return each call as <tool_call>{"name": ..., "arguments": ...}</tool_call><|im_end|>\n' +
  "{%- endif %}" +
  "{%- for message in messages %}" +
  "{%- if message.role == 'assistant' and message.tool_calls %}<|im_start|>assistant\n" +
  "{%- for tc in message.tool_calls %}<tool_call>\n" +
  "{{ {'name': tc.function.name, 'arguments': tc.function.arguments} | tojson }}\n</tool_call>" +
  "{%- endfor %}<|im_end|>\n" +
  "{%- elif message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}" +
  "\n</tool_response><|im_end|>\n" +
  "{%- else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{%- endif %}" +
  "{%- endfor %}" +
  "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}";

export const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", pattern: "^[A-Za-z ]{1,20}$" } },
      required: ["city"],
    },
  },
};
