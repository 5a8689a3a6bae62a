// How a scheduling preset preempts: what becomes of a victim's KV. (Ordering, gating and pausing
// are the SchedulingPolicy's: policy.ts.)

/** What a preempted request's KV becomes, as a fixed choice (`--preempt`). */
export type PreemptKv = "recompute" | "swap" | "partial";

/**
 * How a preset preempts: `fixed` says what a victim's KV becomes (recomputed from its ids, swapped
 * to the host tier, or only its oldest blocks dropped: eLLM); with `auto` (`--recompute auto`)
 * the cost model chooses per victim instead (runtime/preempt_choice.ts).
 */
export interface PreemptRule {
  fixed: PreemptKv;
  auto: boolean;
}

/** The default: recompute, fixed. */
export const RECOMPUTE: PreemptRule = { fixed: "recompute", auto: false };
