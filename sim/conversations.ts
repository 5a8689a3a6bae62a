// Multi-turn conversations, ShareGPT-like (FastSwitch §4.1): conversations start as a Poisson
// process, each turn after the first is sent some think time after the previous turn's stream
// ends, and its prompt is the whole conversation so far plus the user's new message
// (sim/replay.ts's SimRequest builds it from the tokens the reader received). Seeded: the same
// options give the same conversations.

import { exponential, logNormal, seededRandom, subSeed } from "../bench/serve/random.ts";
import type { SimRequest } from "./replay.ts";

export interface ConversationWorkload {
  seed: number;
  conversations: number;
  /** Turns per second over the run: conversations start at rate ÷ mean turns. */
  turnRate: number;
  /** Share of conversations with more than one turn, and the mean turns of all of them. */
  multiTurnShare: number;
  meanTurns: number;
  /** Log-normal lengths of a user's message and of a reply (tokens). */
  input: { median: number; sigma: number };
  output: { median: number; sigma: number };
  /** Mean think time between a reply's end and the next message (s; exponential). */
  thinkS: number;
  /** The model's context: a conversation ends before a turn that would not fit it. */
  maxContext: number;
  sloTtftMs: number;
  sloTbtMs: number;
}

/**
 * Turns per conversation: one with probability 1 − multiTurnShare, else 2 plus a geometric number
 * whose mean makes the whole mean `meanTurns` (FastSwitch's Fig. 4: 78% multi-turn, 5.5 on average).
 */
function turnsOf(next: () => number, w: ConversationWorkload): number {
  if (next() >= w.multiTurnShare) return 1;
  const extra = (w.meanTurns - (1 - w.multiTurnShare)) / w.multiTurnShare - 2;
  const p = 1 / (1 + extra);
  let n = 2;
  while (next() >= p) n++;
  return n;
}

export function conversationWorkload(w: ConversationWorkload): SimRequest[] {
  const arrive = seededRandom(subSeed(w.seed, "conversations"));
  const shape = seededRandom(subSeed(w.seed, "turns"));
  const lengths = seededRandom(subSeed(w.seed, "lengths"));
  const think = seededRandom(subSeed(w.seed, "think"));
  const out: SimRequest[] = [];
  let t = 0;
  for (let c = 0; c < w.conversations; c++) {
    t += exponential(arrive, w.turnRate / w.meanTurns);
    const turns = turnsOf(shape, w);
    let context = 0;
    let previous: number | null = null;
    for (let k = 0; k < turns; k++) {
      const input = Math.max(1, Math.round(logNormal(lengths, w.input.median, w.input.sigma)));
      const output = Math.max(1, Math.round(logNormal(lengths, w.output.median, w.output.sigma)));
      const thinkS = exponential(think, 1 / w.thinkS);
      if (context + input + output > w.maxContext) break;
      const id = out.length;
      out.push({
        id,
        arrivalS: t,
        promptLen: input,
        promptSeed: subSeed(w.seed, `message ${id}`),
        outputLen: output,
        readingRate: 1000, // the paper's TTFT and TBT are the engine's: readers keep up
        sloTtftMs: w.sloTtftMs,
        sloTbtMs: w.sloTbtMs,
        ...(previous === null ? {} : { after: { id: previous, thinkS } }),
      });
      context += input + output;
      previous = id;
    }
  }
  return out;
}
