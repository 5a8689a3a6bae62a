// The chat completions body another API's request translates to, checked by the chat schema: the
// ranges, tools against tool_choice and the messages' rules are chat's, checked once, there. A
// translation the chat schema refuses is the request's fault: a 400 that names the chat field, as
// the other API's fields are not always one-to-one with it.

import { ApiError } from "../openai/errors.ts";
import { ChatRequest } from "../openai/schemas.ts";

export function chatBody(translated: Record<string, unknown>): ChatRequest {
  const parsed = ChatRequest.safeParse(translated);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = issue.path.join(".");
  throw new ApiError(
    400,
    `Invalid request: as a chat completion, '${field}': ${issue.message}`,
    null,
    "invalid_value",
  );
}
