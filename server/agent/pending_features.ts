// Fields the schemas accept whose machinery has not landed in this branch yet: the sampler's
// controls, grammars (structured output, forced tool calls) and the tool-call/reasoning parser.
// Until it does each is refused, unless neutral, with a 400 naming it: a client must never take
// an answer made without them for one made with them. Each line goes when its feature lands.

import { ApiError } from "../openai/errors.ts";
import type { ChatRequest, SharedFields } from "../openai/schemas.ts";

export function refusePendingSampling(body: SharedFields): void {
  const neutral: [keyof SharedFields, boolean][] = [
    ["presence_penalty", !body.presence_penalty],
    ["frequency_penalty", !body.frequency_penalty],
    ["repetition_penalty", body.repetition_penalty == null || body.repetition_penalty === 1],
    ["min_p", !body.min_p],
    ["logit_bias", body.logit_bias == null || Object.keys(body.logit_bias).length === 0],
  ];
  for (const [field, ok] of neutral) if (!ok) throw notYet(field);
}

export function refusePendingChat(body: ChatRequest): void {
  if (body.response_format && body.response_format.type !== "text") throw notYet("response_format");
  for (
    const f of [
      "structured_outputs",
      "guided_json",
      "guided_regex",
      "guided_choice",
      "guided_grammar",
      "json_schema",
      "grammar",
    ] as const
  ) if (body[f] != null) throw notYet(f);
  const choice = body.tool_choice;
  if (body.tools?.length && choice !== "none") throw notYet("tools");
}

function notYet(field: string): ApiError {
  return new ApiError(400, `${field} is not supported yet`, field, "unsupported_parameter");
}
