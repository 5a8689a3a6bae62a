// How many tokens a request drafts in its next step, from what its drafts have earned so far and
// what draft rows cost on this engine. Each draft is taken to be accepted with one probability a
// (the request's own, estimated from its verifications), so k drafts bring, on average,
// 1 + a + ... + a^k tokens in a step that costs c(k) times a plain one (the cost model's step time
// with k more rows, over without). The best k maximises tokens per cost; drafting pays only where
// that beats one token per plain step by a margin. A verification gives up pipelining (a
// speculating request waits for its tokens between steps), so its cost counts the round trip to
// learn that a step is done (Deno's readback: >= 10 ms), which pipelined plain steps hide. On a
// GPU more rows cost little but the round trip is dear next to a step; on a CPU rasteriser each
// row costs. Either way, it takes a high enough acceptance.

import { type CostModel, predictStepMs } from "../../engine/kv/cost_model.ts";

/**
 * Tokens per cost a draft length must reach over plain decoding's 1: a margin for what the cost
 * model does not see (a speculating step stops decode groups for the batch; sample rows' LM head).
 */
export const MIN_GAIN = 1.3;

/**
 * Where no cost model says: a draft row's cost relative to a step (a GPU's few extra rows), and
 * the round trip a verification waits for, relative to a step.
 */
export const DEFAULT_ROW_COST = 0.05;
export const DEFAULT_WAIT_COST = 0.25;

/**
 * A request's verifications as counts that fade (each new one weighs more than the old): drafts
 * accepted, and verifications ended by a rejected draft.
 */
export interface AcceptanceRecord {
  accepted: number;
  rejected: number;
}

/** How fast old verifications fade, per verification. */
const FADE = 0.9;

export function newRecord(): AcceptanceRecord {
  return { accepted: 0, rejected: 0 };
}

/** A verification that accepted `accepted` of `drafted` drafts. */
export function record(r: AcceptanceRecord, accepted: number, drafted: number): void {
  r.accepted = FADE * r.accepted + accepted;
  r.rejected = FADE * r.rejected + (accepted < drafted ? 1 : 0);
}

/** Halves what it knows: after a pause, the prior weighs more, so the request tries again. */
export function fade(r: AcceptanceRecord): void {
  r.accepted /= 2;
  r.rejected /= 2;
}

/**
 * The chance a draft is accepted: accepted drafts over drafts judged (a geometric's estimate),
 * from a prior of half an accepted and half a rejected draft (0.5, moved by the first verification).
 */
export function acceptance(r: AcceptanceRecord): number {
  return (r.accepted + 0.5) / (r.accepted + r.rejected + 1);
}

/** Tokens a step with k drafts brings on average, each accepted with probability `a`. */
export function expectedTokens(a: number, k: number): number {
  return a >= 1 ? k + 1 : (1 - a ** (k + 1)) / (1 - a);
}

/** What a step costs on this engine: its cost model (if it has one), and decode groups' length. */
export interface StepCosts {
  model(): CostModel | undefined;
  /** Most steps of a decode group: plain steps share one round trip among this many. */
  groupSteps: number;
}

/**
 * Drafts (0..most) that bring the most tokens per cost to a step of `rows` rows (a decode row
 * each, this request's among them); 0 when none reaches MIN_GAIN. A plain step pays its share of
 * a decode group's round trip; a verification pays its own, and the whole step waits for it.
 */
export function draftLength(a: number, most: number, rows: number, costs: StepCosts): number {
  const model = costs.model();
  const step = (n: number) => predictStepMs(model!, { rows: n, samples: n });
  const plain = model ? step(rows) + model.roundTripMs / Math.max(1, costs.groupSteps) : 0;
  const cost = (k: number) =>
    model && plain > 0
      ? (step(rows + k) + model.roundTripMs) / plain
      : 1 + DEFAULT_WAIT_COST + DEFAULT_ROW_COST * k;
  let best = 0, bestGain = MIN_GAIN;
  for (let k = 1; k <= most; k++) {
    // The step's other rows wait with it: its tokens are theirs plus this request's.
    const gain = (rows - 1 + expectedTokens(a, k)) / (rows * cost(k));
    if (gain > bestGain) [best, bestGain] = [k, gain];
  }
  return best;
}
