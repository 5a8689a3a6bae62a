// Multi-step decode, the runtime's half: how many decode steps one submission may run. A group
// saves a readback and a submission per step (Deno resolves each readback >= 10 ms after the GPU
// finishes), but the scheduler decides nothing while it runs: a cancel, an arrival or a pacing
// decision waits for the next group. So a group runs only when this step had nothing to decide
// (scheduler.ts says when), and its length is bounded in time as well as in steps.
//
// Inside a group, rows stop on the GPU at their max_tokens or a stop id; top logprobs, logit bias
// and penalties work as in single steps (each step's records come back, counts update per step).
// Stop strings need text, which only the server has: a group may decode up to k - 1 tokens past
// one, which the server's text stream never sends, as it drops the one or two that pipelined
// single steps decode past it; the cancel that follows lands at the next submission.

/** `--decode-steps`: most steps per group (1: none), and the most time a group may take (ms). */
export interface DecodeSteps {
  max: number;
  groupMs: number;
}

/** No groups: every submission is one step (today's behaviour before multi-step). */
export const NO_GROUPS: DecodeSteps = { max: 1, groupMs: 0 };

/** `--decode-steps` by default. */
export const DEFAULT_DECODE_STEPS = 8;

/** A group's time bound by default: a cancel or an arrival waits at most about this long. */
export const DEFAULT_GROUP_MS = 200;

/**
 * Steps for a group of decode steps predicted (or last measured) at `stepMs` each: as many as fit
 * in groupMs, at most `max`; 1 when nothing says how long a step takes.
 */
export function groupSize(steps: DecodeSteps, stepMs: number | null): number {
  if (steps.max <= 1 || stepMs === null || !(stepMs > 0)) return 1;
  return Math.max(1, Math.min(steps.max, Math.floor(steps.groupMs / stepMs)));
}

/** The scheduler's decode groups: how long the next may be, and how many have run. */
export class DecodeGroups {
  /** Steps built as decode groups, and the decode steps they held. */
  groups = 0;
  groupedSteps = 0;
  /** The last measured time of one decode step (ms), for when no cost model predicts. */
  private measuredStepMs: number | null = null;

  constructor(private readonly steps: DecodeSteps = NO_GROUPS) {}

  /** Steps `rows` decode rows may run as one group, predicted at `predictedMs` a step (1: none). */
  size(rows: number, predictedMs: () => number | null): number {
    if (rows === 0) return 1;
    return groupSize(this.steps, predictedMs() ?? this.measuredStepMs);
  }

  /** A group of `steps` steps was built. */
  built(steps: number): void {
    this.groups++;
    this.groupedSteps += steps;
  }

  /** The measured time of one decode step (ms). */
  observeStepMs(ms: number): void {
    if (Number.isFinite(ms) && ms > 0) this.measuredStepMs = ms;
  }
}
