// Reserve-everything admission (Sluice's first scheduler, kept for comparison): a request is
// admitted only when KV for its prompt plus max_tokens is free, and takes it all at once, so a
// running request never runs short and nothing is ever preempted; the price is fewer requests
// running at once, since most requests stop well before max_tokens.

import type { Request } from "../request/request.ts";
import type { SchedulingPolicy } from "./policy.ts";
import { makePreset, type PresetEntry } from "./preset.ts";

export const reservePolicy: SchedulingPolicy = {
  name: "reserve",
  admissionTokens: (req: Request) => req.promptLength + req.spec.maxTokens,
  pickVictim: (_running: readonly Request[], needy: Request) => {
    throw new Error(`request ${needy.id} ran out of reserved KV blocks`);
  },
};

/** `--sched reserve`. */
export const reserve: PresetEntry = { make: (o) => makePreset("reserve", reservePolicy, o) };
