// LayerKV's SLO-aware admission (`--sched slo`): fcfs's on-demand blocks and victims, but a
// waiting request's prefill is admitted only while every decoding request can still meet its
// time-between-tokens SLO through the steps that prefill will take.
//
// Chunked prefill puts a prefill's rows into the decode steps (up to maxRows rows a step), so
// while a prefill runs each decode token takes stepMs(decodes + chunk) instead of stepMs(decodes).
// The gate predicts those steps from the cost model (every prefill admitted before it comes
// first, then its own rows) and plays them against each decoding request's stream:
//
//   a reader gets its next token at max(previous release + 1000/rate, when it is made), so the
//   tokens in its buffer keep it reading at its own pace while steps run slow, and a gap longer
//   than its TBT SLO appears only once the buffer has run dry and a step takes longer than it.
//
// This is the paper's slack (Eq. 1-2), counted per token rather than over the whole request, with
// the playout seconds already in the buffer as banked time. Choices the paper leaves open:
//   - a request with no TBT SLO (none given, no `--slo-tbt-ms`) asks for nothing, so it never
//     holds an admission; an unpaced reader (rate 0) banks nothing: every step must fit its TBT;
//   - without a cost model (stepMs null) the gate is open: exactly fcfs;
//   - never starve: with no decoding request to protect the head is admitted (and since nobody
//     overtakes it, the decodes it waits for only finish); and it is held no longer than its own
//     SLO allows: a new request is admitted once waiting one more step would make it miss its
//     TTFT SLO, a preempted one once its own buffer and TBT SLO could not cover another step.
//     Then it runs even if a decode's gap goes over: one miss for another, not a miss for ever.

import type { Request } from "../request/request.ts";
import { fcfsPolicy } from "./fcfs.ts";
import type { PolicyContext, SchedulingPolicy } from "./policy.ts";
import { makePreset, type PresetEntry } from "./preset.ts";

/** A run of `count` steps that each take `ms`. */
export interface StepRun {
  count: number;
  ms: number;
}

/** Token rows a waiting request's prefill will run: what it must compute before its next sample. */
export function prefillRows(req: Request): number {
  const target = req.prefillTarget;
  // Resumes holding its newest KV: the dropped oldest positions, then at least the last.
  if (req.dropped > 0) return req.dropped + target - Math.min(req.computed, target - 1);
  // Swapped to the host tier: the host copy comes back, the rest is computed.
  if (req.swapped) return target - Math.min(req.hostTokens, target - 1);
  // A prefix-cache hit would save some; the gate cannot know, so it assumes none (conservative).
  return target;
}

/** Running requests that will sample again (a decode row in each coming step). */
export function decodes(req: Request): boolean {
  return req.state === "decoding" && req.issued < req.spec.maxTokens;
}

/**
 * The steps `rows` prefill rows take beside `decodeRows` decode rows, at most maxRows rows a step:
 * full chunks, then the remainder. Null without a cost model.
 */
export function prefillSteps(
  rows: number,
  decodeRows: number,
  ctx: PolicyContext,
): StepRun[] | null {
  const chunk = Math.max(1, ctx.maxRows - decodeRows);
  const full = Math.floor(rows / chunk), rest = rows % chunk;
  const fullMs = ctx.stepMs(decodeRows + chunk, decodeRows);
  const restMs = ctx.stepMs(decodeRows + rest, decodeRows);
  if (fullMs === null || restMs === null) return null;
  return [{ count: full, ms: fullMs }, { count: rest > 0 ? 1 : 0, ms: restMs }]
    .filter((r) => r.count > 0);
}

/**
 * Whether `req`'s reader sees no gap longer than its TBT SLO while `steps` run (one token each),
 * starting from the tokens in its buffer.
 */
export function keepsTbt(req: Request, steps: readonly StepRun[]): boolean {
  const tbt = req.spec.slo.tbtMs;
  // A gap is at most the step that made its token: steps within the SLO never break it.
  if (tbt === undefined || steps.every((s) => s.ms <= tbt)) return true;
  const interval = req.buffer.paced ? 1000 / req.buffer.rate : 0;
  const bankedMs = req.buffer.occupancy().seconds * 1000;
  // Times from now: the last buffered token is released (at the earliest) at `last`; each step's
  // token is made at `made` and released at max(last + interval, made).
  let last = Math.max(0, bankedMs - interval), made = 0;
  for (const { count, ms } of steps) {
    for (let i = 0; i < count; i++) {
      made += ms;
      if (made - last > tbt) return false;
      last = Math.max(last + interval, made);
    }
  }
  return true;
}

/**
 * Whether holding `req` one more step (`holdMs`) before its `prefillMs` would make it miss its own
 * SLO: its TTFT when it has no token yet, else its TBT once its buffer has played out.
 */
function ownSloDue(req: Request, prefillMs: number, holdMs: number, ctx: PolicyContext): boolean {
  const { ttftMs, tbtMs } = req.spec.slo;
  if (req.generated.length === 0) {
    return ttftMs !== undefined && ctx.now() + holdMs + prefillMs >= req.arrivedAt + ttftMs;
  }
  const bankedMs = req.buffer.occupancy().seconds * 1000;
  return tbtMs !== undefined && holdMs + prefillMs >= bankedMs + tbtMs;
}

export const sloPolicy: SchedulingPolicy = {
  name: "slo",
  admissionTokens: fcfsPolicy.admissionTokens,
  pickVictim: fcfsPolicy.pickVictim,

  mayAdmit(req, running, ctx) {
    const protectedReqs = running.filter((r) => decodes(r) && r.spec.slo.tbtMs !== undefined);
    if (protectedReqs.length === 0) return true;
    // Prefilling requests decode by the time this prefill's rows run: count their decode rows.
    const decodeRows = running.filter((r) => decodes(r) || r.state === "prefilling").length;
    const rows = running.reduce((n, r) => n + r.prefillRowsLeft, prefillRows(req));
    const steps = prefillSteps(rows, decodeRows, ctx);
    const holdMs = ctx.stepMs(decodeRows, decodeRows);
    if (steps === null || holdMs === null) return true; // no cost model: fcfs
    if (protectedReqs.every((r) => keepsTbt(r, steps))) return true;
    const prefillMs = steps.reduce((ms, s) => ms + s.count * s.ms, 0);
    return ownSloDue(req, prefillMs, holdMs, ctx);
  },
};

/** `--sched slo`, and LayerKV's layer-wise prefill (`--layerwise-prefill`), which tokenflow takes too. */
export const slo: PresetEntry = {
  make: (o) => makePreset("slo", sloPolicy, o),
  takes: ["layerwisePrefill"],
};
