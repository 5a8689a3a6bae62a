// FastSwitch's priority churn (§4.2): every 1/f engine iterations the priorities of all live
// requests change, on a schedule computed from a seed, as one of its two patterns. The paper names
// the patterns but gives neither their levels nor their transitions, so these are ours:
//
//   Random  every live request draws a fresh level, uniformly and independently ("no temporal
//           correlation").
//   Markov  each request's level is a Markov chain whose step depends on whether it was served
//           since the last update: served, it moves one level better with probability p; not
//           served, one level worse with probability p; else it stays ("requests that have been
//           frequently or recently served are given higher priority").
//
// Both start a request at a uniformly drawn level. Levels follow vLLM's convention (lower is served
// first) and Sluice's (runtime/policy/priority.ts): 0..levels−1.

import { seededRandom, subSeed } from "../bench/serve/random.ts";

export type ChurnPattern = "random" | "markov";

/** A live request as the churn sees it. */
export interface ChurnTarget {
  /** Its workload id. */
  id: number;
  /** Its priority now. */
  priority: number;
  /** Tokens it has received since the last update. */
  servedSinceUpdate: number;
}

/** Priority changes applied to the replay's live requests (sim/replay.ts). */
export interface PriorityChurn {
  /** Engine iterations between updates (FastSwitch's 1/f: 25 for LLaMA-8B). */
  everySteps: number;
  /** The priority a request is submitted with. */
  initial(id: number): number;
  /** New priorities of `live` (by id; absent: unchanged). */
  update(live: readonly ChurnTarget[]): Map<number, number>;
}

export interface ChurnOptions {
  pattern: ChurnPattern;
  seed: number;
  /** Priority-update frequency f (updates per iteration; the paper's 0.04 for LLaMA-8B). */
  frequency: number;
  /** Priority levels (default 4). */
  levels?: number;
  /** Markov: the probability of a step (default 0.5). */
  moveProbability?: number;
}

export function priorityChurn(o: ChurnOptions): PriorityChurn {
  const levels = o.levels ?? 4, p = o.moveProbability ?? 0.5;
  const rand = seededRandom(subSeed(o.seed, `churn ${o.pattern}`));
  const draw = () => Math.floor(rand() * levels);
  // Initial levels from their own stream, by id: a request's level does not depend on when it came.
  const initial = (id: number) =>
    Math.floor(seededRandom(subSeed(o.seed, `level ${id}`))() * levels);
  return {
    everySteps: Math.max(1, Math.round(1 / o.frequency)),
    initial,
    update(live) {
      const out = new Map<number, number>();
      // In id order, so the draws do not depend on the order the replay lists them in.
      for (const r of [...live].sort((a, b) => a.id - b.id)) {
        if (o.pattern === "random") {
          out.set(r.id, draw());
          continue;
        }
        if (rand() >= p) continue;
        const next = r.servedSinceUpdate > 0 ? r.priority - 1 : r.priority + 1;
        out.set(r.id, Math.min(levels - 1, Math.max(0, next)));
      }
      return out;
    },
  };
}
