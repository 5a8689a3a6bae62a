// Which loaded model makes room for another: the least recently used of those that are idle. A
// busy one (a request holds it, or its runtime still runs or streams requests) is never chosen; if
// every candidate is busy there is no victim, and the load waits.

export interface EvictionCandidate {
  id: string;
  lastUsedMs: number;
  busy: boolean;
}

export function modelVictim(candidates: EvictionCandidate[]): string | null {
  let victim: EvictionCandidate | null = null;
  for (const c of candidates) {
    if (c.busy) continue;
    if (victim === null || c.lastUsedMs < victim.lastUsedMs) victim = c;
  }
  return victim?.id ?? null;
}
