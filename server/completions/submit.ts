// Hands a built request to the runtime and turns its refusals into HTTP: a request it will never
// run is a 400 naming the body's field, a full queue a 429 with Retry-After, a closing server a
// 503. The runtime decides all of these; this only translates. The runtime also refuses a large
// prompt that cannot fit before it is tokenized, from a lower bound on its count: the same 400.

import {
  InvalidRequest,
  Refused,
  type RequestHandle,
  type Runtime,
  type SubmitParams,
} from "../../runtime/service.ts";
import { ApiError, shuttingDown } from "../openai/errors.ts";

export function submit(
  runtime: Runtime,
  params: SubmitParams,
  /** The body field that holds the prompt ("messages" or "prompt"). */
  promptParam: string,
): RequestHandle {
  return asHttp(() => runtime.submit(params), promptParam);
}

/** Refuses, as submit would, a prompt of at least `atLeast` tokens that cannot fit. */
export function checkPromptLength(runtime: Runtime, atLeast: number, promptParam: string): void {
  asHttp(() => runtime.checkPromptLength(atLeast), promptParam);
}

function asHttp<T>(call: () => T, promptParam: string): T {
  try {
    return call();
  } catch (err) {
    if (err instanceof InvalidRequest) {
      const param = err.param === "prompt" || err.param === "messages" ? promptParam : err.param;
      throw new ApiError(400, err.message, param, err.code);
    }
    if (err instanceof Refused) {
      if (err.code === "shutting_down") throw shuttingDown(err.message);
      throw new ApiError(429, err.message, null, "rate_limit_exceeded", "rate_limit_error", {
        "Retry-After": String(err.retryAfterS),
      });
    }
    throw err;
  }
}
