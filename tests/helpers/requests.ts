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

/** Where `stage` leaves a request. */
export type Scene = "waiting" | "prefilling" | "decoding" | "paused";

/**
 * Drives `req` through its own methods, as the scheduler would, into `scene`: admitted at batch
 * row 0 as the `order`th admission, its prefill computed to `computed` positions; past
 * "prefilling" it decodes, each of `generated` sampled and taken back; "paused" then leaves the
 * batch, its KV freed. A waiting request is left as it is.
 */
export function stage(
  req: Request,
  scene: Scene,
  { order = 0, computed = 0, generated = [] }: {
    order?: number;
    computed?: number;
    generated?: readonly number[];
  } = {},
): Request {
  if (scene === "waiting") return req;
  req.admit(0, order, 0);
  req.computeTo(computed);
  if (scene === "prefilling") return req;
  req.startDecoding();
  for (const id of generated) {
    req.issueSample();
    req.accept({ id, logprob: 0, top: [] });
  }
  if (scene === "paused") req.pause();
  return req;
}
