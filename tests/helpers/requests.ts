// Requests for tests that drive the scheduler or a policy directly, without a Runtime.

import { Request, type RequestSpec } from "../../runtime/request/request.ts";
import type { SamplingParams } from "../../engine/engine.ts";

/** Greedy sampling (temperature 0): the same tokens however a request is scheduled. */
export const greedy = (seed = 0): SamplingParams => ({ temperature: 0, topK: 0, topP: 1, seed });

/**
 * A request as the runtime would make it, arrived at `arrivedAt`: greedy, no logprobs, no stop
 * ids, unpaced, no SLO, 8 tokens at most, unless `spec` says otherwise.
 */
export function testRequest(
  id: number,
  spec: Partial<RequestSpec> & Pick<RequestSpec, "ids">,
  arrivedAt = 0,
): Request {
  return new Request(id, {
    maxTokens: 8,
    sampling: greedy(),
    topLogprobs: 0,
    stopIds: new Set(),
    readingRate: 0,
    slo: {},
    ...spec,
  }, arrivedAt);
}
