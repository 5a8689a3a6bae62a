// The stats of a runtime with nothing to do: tests of what reads RuntimeStats (metrics, the
// playground's panel) spread their own fields over it.

import type { RuntimeStats } from "../../runtime/service.ts";

export const IDLE_STATS: RuntimeStats = {
  waiting: 0,
  paused: 0,
  running: 0,
  kvBlocksUsed: 0,
  kvBlocksCached: 0,
  kvBlocksTotal: 0,
  hostBlocksUsed: 0,
  hostBlocksTotal: 0,
  hostBlocksCached: 0,
  swaps: null,
  offload: null,
  kvBytesMoved: { out: 0, in: 0 },
  prefix: null,
  steps: 0,
  tokensGenerated: 0,
  preemptions: 0,
  partialResumes: 0,
  windowReleasedBlocks: 0,
  policyPauses: 0,
  preemptChoices: { swap: 0, dropOldest: 0, dropAll: 0 },
  recomputedTokens: 0,
  effectiveTokens: 0,
  requests: [],
};
