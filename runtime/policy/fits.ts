// The scheduler's admission rule as a policy can see it: a request is admitted when a batch slot is
// free and its admission KV (policy.admissionTokens) fits in the blocks every layer can still be
// given. Policies that pause running requests to let a waiting one in (tokenflow, priority) ask it
// before they pause anyone. The scheduler itself admits by allocating (runtime/scheduler.ts).

import type { PolicyContext } from "./policy.ts";

/**
 * Whether a request needing `tokens` positions on every layer would be admitted now, with the
 * `freed` slots and blocks per layer that pauses decided but not yet made will give back.
 */
export function fits(
  tokens: number,
  ctx: PolicyContext,
  freed: { slots: number; blocks: number } = { slots: 0, blocks: 0 },
): boolean {
  const blocks = Math.ceil(tokens / ctx.blockSize);
  return ctx.freeSlots + freed.slots > 0 && blocks <= ctx.freeBlocksPerLayer + freed.blocks;
}
