// Per-request priorities with aging (`--priority on`; FastSwitch's fairness-aware serving), as a
// wrapper over any scheduling policy. The convention is vLLM's: an integer, lower is served first,
// default 0; here bounded to MIN_PRIORITY..MAX_PRIORITY, and it may change while the request runs.
//
// A request's effective priority is its priority improved by one level for every AGING_MS it has
// spent waiting (queued, or paused), but never better than the best priority among live requests:
//
//   effective(r) = max(r.priority − floor(waitedMs(r) / agingMs), best priority among live ones)
//
// No starvation: however many better requests keep arriving, one of priority p is level with the
// best after at most (p − MIN_PRIORITY) × agingMs of waiting, and from then on only ties stand
// before it, which the wrapped policy orders as it would without priorities (fcfs: its queue
// order). Waiting time is kept while a request runs, so one that has waited its way up is not
// paused again by the next arrival. The floor keeps requests of one priority level with each other
// whatever they have waited: when every request has the same priority the wrapper changes nothing,
// and the wrapped policy takes the very same steps.
//
// What the wrapper decides, each time leaving ties to the wrapped policy:
//   order:           waiting requests by effective priority (a stable sort of the wrapped order);
//   pickVictim:      the wrapped policy's victim among the running requests of the worst
//                    effective priority;
//   pauseBeforeStep: when the first waiting request that can run has a strictly better effective
//                    priority than the worst running one and does not fit (no free slot, or too
//                    few free blocks), that running one is paused (the newest admitted among
//                    equals): one a step, until it fits. Its stream plays on from its buffer; with
//                    `--preempt swap` its KV goes to the host tier, and since host copies stay
//                    valid after a swap-in, pausing it again moves only the KV made since.
//
// Waiting time is measured at step boundaries (each pauseBeforeStep sees who waits and who runs),
// so it is off by at most a step.

import type { Request } from "../request/request.ts";
import { fits } from "./fits.ts";
import type { PolicyContext, SchedulingPolicy } from "./policy.ts";

export const MIN_PRIORITY = -100;
export const MAX_PRIORITY = 100;
/**
 * Waiting this long (ms) improves a request's priority by one level: after a second of waiting a
 * request is level with those one level better, after 100 seconds with those 100 levels better.
 */
export const AGING_MS = 1000;

export interface PriorityOptions {
  /** Ms of waiting per level of improvement (default AGING_MS; Infinity: no aging). */
  agingMs?: number;
}

/** Time a request has waited: closed intervals, and the start of an open one. */
interface Waited {
  ms: number;
  since: number | null;
}

export function withPriority(
  policy: SchedulingPolicy,
  options: PriorityOptions = {},
): SchedulingPolicy {
  const agingMs = options.agingMs ?? AGING_MS;
  const waited = new WeakMap<Request, Waited>();
  /** The requests live at the last step boundary, for the floor. */
  let live: readonly Request[] = [];
  /** The clock at the last hook that had it (pickVictim is not given the context). */
  let lastNow = 0;

  const sawWaiting = (req: Request, now: number) => {
    const w = waited.get(req);
    if (!w) waited.set(req, { ms: 0, since: now });
    else if (w.since === null) w.since = now;
  };
  const sawRunning = (req: Request, now: number) => {
    const w = waited.get(req);
    if (!w) waited.set(req, { ms: 0, since: null });
    else if (w.since !== null) {
      w.ms += now - w.since;
      w.since = null;
    }
  };
  const waitedMs = (req: Request, now: number) => {
    const w = waited.get(req);
    return w ? w.ms + (w.since === null ? 0 : now - w.since) : 0;
  };

  /** Effective priority at `now`, the floor taken over the live requests and `also`. */
  function ranker(now: number, also: readonly Request[]): (req: Request) => number {
    let floor = Infinity;
    for (const list of [live, also]) {
      for (const r of list) if (!r.finish) floor = Math.min(floor, r.priority);
    }
    return (req) => Math.max(req.priority - Math.floor(waitedMs(req, now) / agingMs), floor);
  }

  function order(waiting: readonly Request[], ctx: PolicyContext): Request[] {
    const now = lastNow = ctx.now();
    for (const r of waiting) sawWaiting(r, now);
    const effective = ranker(now, waiting);
    const base = policy.order ? policy.order(waiting, ctx) : waiting;
    const sorted = base.map((req) => ({ req, e: effective(req) }))
      .sort((a, b) => a.e - b.e) // stable: ties keep the wrapped order
      .map((x) => x.req);
    if (policy.order) return sorted;
    // Queue order waits for a request that is not ready yet; the scheduler does that only for
    // policies without an order of their own, so the queue is cut there.
    const cut = sorted.findIndex((r) => !r.resumable);
    return cut < 0 ? sorted : sorted.slice(0, cut);
  }

  function pickVictim(running: readonly Request[], needy: Request): Request {
    const effective = ranker(lastNow, running);
    const worst = Math.max(...running.map(effective));
    return policy.pickVictim(running.filter((r) => effective(r) === worst), needy);
  }

  function pauseBeforeStep(
    running: readonly Request[],
    waiting: readonly Request[],
    ctx: PolicyContext,
  ): Request[] {
    const now = lastNow = ctx.now();
    for (const r of running) sawRunning(r, now);
    for (const r of waiting) sawWaiting(r, now);
    live = [...running, ...waiting];
    const named = policy.pauseBeforeStep?.(running, waiting, ctx) ?? [];
    if (named.length > 0) return named; // its pauses first; ours next step
    // The scheduler pauses neither a finished request nor one still refilling dropped KV.
    const pausable = running.filter((r) => !r.finish && !r.refill);
    const effective = ranker(now, []);
    const worst = Math.max(...pausable.map(effective));
    if (!waiting.some((r) => effective(r) < worst)) return [];
    const head = order(waiting, ctx).find((r) => r.resumable);
    // Admitted without anyone leaving: a free slot and its blocks.
    if (!head || effective(head) >= worst || fits(policy.admissionTokens(head), ctx)) return [];
    const victim = pausable.filter((r) => effective(r) === worst)
      .reduce((newest, r) => r.admittedAt > newest.admittedAt ? r : newest);
    return [victim];
  }

  return {
    name: `${policy.name}+priority`,
    admissionTokens: (req) => policy.admissionTokens(req),
    pickVictim,
    order,
    pauseBeforeStep,
    ...(policy.mayAdmit
      ? { mayAdmit: (req, running, ctx) => policy.mayAdmit!(req, running, ctx) }
      : {}),
    ...(policy.holdBack
      ? { holdBack: (running, ctx, waiting) => policy.holdBack!(running, ctx, waiting) }
      : {}),
  };
}
