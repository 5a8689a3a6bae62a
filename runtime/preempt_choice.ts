// What becomes of a preempted request's KV under `--recompute auto` (eLLM; TokenFlow's "recompute
// or reload"): swap it to the host tier, drop only its oldest blocks and compute them again on
// resume, or drop it all and prefill everything again. Each option is priced in predicted GPU ms
// from the profiled (and re-fitted) cost model, and the cheapest is taken. Pure arithmetic over
// numbers; the scheduler gathers them and carries the choice out.
//
// The objective: the least
//
//   score = nowMs + resumeMs + max(0, resumeMs − slackMs)
//
//   nowMs     GPU time spent at the preemption: the swap's copy out, in the very next step;
//   resumeMs  GPU time spent when it is readmitted, before its next token: copies in, rows
//             computed again (in prefill chunks of maxRows);
//   slackMs   how long its stream can wait unnoticed: its buffered playout plus its TBT SLO.
//
// The first two terms are time taken from the steps of every running request, so the cheaper
// option keeps more of them within their TBT; the last is the victim's own stall, what its buffer
// cannot hide. Every option frees at least the room the needy request asked for, so it runs this
// step whatever is chosen. Computing k dropped blocks again costs more the larger k is, so the
// fewest blocks that make room are always the cheapest partial drop. On a tie the option that
// frees more device memory wins: drop all, then swap, then drop the oldest.

export type PreemptKind = "swap" | "dropOldest" | "dropAll";

/** The victim, in the numbers its options are priced by. */
export interface PreemptVictim {
  /** Leading positions whose KV it holds on the device. */
  computed: number;
  /**
   * Positions a resume must have KV for: prompt and generated ids. The last is always computed
   * again (its logits pick the next token), as is anything past `computed`.
   */
  target: number;
  /** Leading blocks (per layer) already on the host or on their way there: not copied out again. */
  hostBlocks: number;
  /** The host tier has room for its KV (a swap is possible). */
  canSwap: boolean;
  /** Fewest oldest blocks (per layer) whose drop makes the room asked for; 0: no partial drop. */
  dropBlocks: number;
  /** Its buffered playout plus its TBT SLO, in ms: a resume within it goes unnoticed. */
  slackMs: number;
}

/** The cost model's predictions the options are priced with. */
export interface PreemptCosts {
  blockSize: number;
  /** Most rows per step: a prefill of more rows takes several steps. */
  maxRows: number;
  /** Predicted ms of one step of `rows` rows, none sampled. */
  stepMs(rows: number): number;
  /** Predicted ms to copy `blocksPerLayer` blocks of every layer between the tiers. */
  copyMs(direction: "in" | "out", blocksPerLayer: number): number;
}

export interface PreemptOption {
  kind: PreemptKind;
  /** Blocks (per layer) dropped from the oldest: dropOldest only, else 0. */
  blocks: number;
  nowMs: number;
  resumeMs: number;
  scoreMs: number;
}

/** Tie order: the option freeing more device memory first. */
const TIE_ORDER: readonly PreemptKind[] = ["dropAll", "swap", "dropOldest"];

/** Every option open to `v`, priced. Dropping all is always open. */
export function preemptOptions(v: PreemptVictim, c: PreemptCosts): PreemptOption[] {
  const B = c.blockSize;
  const prefill = (rows: number) => prefillMs(rows, c.maxRows, c.stepMs);
  const copy = (dir: "in" | "out", blocks: number) => blocks > 0 ? c.copyMs(dir, blocks) : 0;
  // What a resume keeps of its KV: never its last position.
  const kept = Math.min(v.computed, v.target - 1);
  const option = (kind: PreemptKind, blocks: number, nowMs: number, resumeMs: number) => ({
    kind,
    blocks,
    nowMs,
    resumeMs,
    scoreMs: nowMs + resumeMs + Math.max(0, resumeMs - v.slackMs),
  });
  const options = [option("dropAll", 0, 0, prefill(v.target))];
  if (v.canSwap) {
    const out = copy("out", Math.max(0, Math.ceil(v.computed / B) - v.hostBlocks));
    const back = copy("in", Math.ceil(kept / B)) + prefill(v.target - kept);
    options.push(option("swap", 0, out, back));
  }
  if (v.dropBlocks > 0) {
    options.push(
      option("dropOldest", v.dropBlocks, 0, prefill(v.dropBlocks * B + v.target - kept)),
    );
  }
  return options;
}

/** The option of least score (ties: drop all, then swap, then drop the oldest). */
export function choosePreemption(v: PreemptVictim, c: PreemptCosts): PreemptOption {
  const rank = (o: PreemptOption) => TIE_ORDER.indexOf(o.kind);
  return preemptOptions(v, c).reduce((best, o) =>
    o.scoreMs < best.scoreMs || (o.scoreMs === best.scoreMs && rank(o) < rank(best)) ? o : best
  );
}

/** Predicted ms to compute `rows` rows as prefill: full steps of `maxRows`, then the rest. */
export function prefillMs(rows: number, maxRows: number, stepMs: (rows: number) => number): number {
  if (rows <= 0) return 0;
  const full = Math.floor(rows / maxRows), rest = rows - full * maxRows;
  return full * stepMs(maxRows) + (rest > 0 ? stepMs(rest) : 0);
}
