// TokenFlow's buffer-aware preemptive scheduling (`--sched tokenflow`). A reader takes tokens at
// its reading rate; tokens made far ahead of it only sit in its buffer. So when requests wait, a
// running request whose buffer holds enough seconds of playout is paused (its reader goes on
// reading the buffer) to let a waiting one run, and a paused request is brought back before its
// buffer runs dry, in place of the running request with the most playout banked. And a request
// whose reader has more than the horizon buffered sits steps out, keeping its KV, until it is back
// under it: tokens made just in time, not far ahead, free the adapter for everyone else.
//
// All thresholds are seconds of playout in a request's token buffer, against these costs:
//   interval Δt        how often decisions can take effect (a step or a few; 0.5 s by default);
//   τ_out(r), τ_in(r)  moving r's KV out and back: predicted copies with a host tier (out is free
//                      without one), and for τ_in the cheaper of the copy and recomputing it;
//   lowWater(r)        = μ·(τ_in(r) + Δt): a paused request whose buffer is down to this is due;
//   horizon(r)         = lowWater + μ·(τ_out + τ_in) + 3Δt: above it r is held back, and may be
//                      paused for a new request (it then stays out a while);
//   pausable for a due request   ≥ lowWater + μ·(τ_out + τ_in) + Δt, and more than the due one has.
// A pause is made only for a request that the admission gate will let in that very step, and for
// one such request per step: each pause adds a move out to the step every reader waits for, and a
// request paused for nobody only spends its playout.
// A pause for a request never admitted also waits for its prefill: the victim comes back only once
// the newcomer has banked playout of its own, so its buffer must cover μ·prefill(due) on top.
// μ is the safety factor (TokenFlow's buffer conservativeness; 2 by default). Unpaced readers
// bank nothing, so they are never paused for others.
//
// TTFT is an SLO like TBT: a request waiting for its first token is stalling too. So by default
// (each rule a flag, measured in the workload matrix: docs/benchmarks/matrix.md):
//   - new requests are admitted as memory allows, as fcfs admits them, even when the batch then
//     runs slower than its fastest reader (`keepUp` off; on: admission stops at the largest batch
//     whose predicted step keeps up) or when the working set's reading rates add up to more than
//     the adapter makes at the largest batch of them that fits in device memory (`overload`
//     "admit"; "hold": the paper's fallback, which admits no new request until it can keep up).
//     Either guard trades first tokens for smoothness: the matrix measured TTFT p99 up to 3×
//     fcfs's with them on. When overloaded, nobody is paused for anyone;
//   - waiting requests are offered admission by slack: seconds of playout left for a paused one,
//     seconds left to its TTFT SLO for a new one. A new request past its SLO has negative slack and
//     goes first (`late` "by-slack"); with `late` "behind" it goes after the paused ones, whose
//     readers are still reading;
//   - a request is held back just in time only while no request waits (`holdBack` "idle"): when
//     one does, finishing sooner frees memory for it, and tokens made ahead cost nothing then.
// A declared rate counts only if the adapter can serve it: a reader faster than the adapter makes
// tokens for one request alone (a batch of one) is kept up with by no batch, so its rate cannot
// choose a batch size. It is served as fast as the adapter can, exactly like an unpaced reader: it
// stops no admission, adds no demand, is never held back or paused. Else one greedy rate (up to
// 10,000 tokens/s is accepted) would make every batch "too slow" and keep everyone else out.
// Without a cost model every cost is 0 and both guards are off.

import type { Request } from "../request/request.ts";
import { fcfsPolicy } from "./fcfs.ts";
import { fits } from "./fits.ts";
import type { PolicyContext, SchedulingPolicy } from "./policy.ts";
import { makePreset, type PresetEntry } from "./preset.ts";

export interface TokenFlowParams {
  /** Δt, seconds. */
  intervalS: number;
  /** μ ≥ 1: how many times the predicted switch cost a buffer must cover. */
  safety: number;
  /** Admission stops at the largest batch that keeps up with its fastest reader. */
  keepUp: boolean;
  /** When the working set reads faster than the adapter makes: admit new requests, or hold them. */
  overload: "admit" | "hold";
  /** Where a new request past its TTFT SLO stands against paused ones. */
  late: "by-slack" | "behind";
  /** Hold requests back just in time always, or only while no request waits for admission. */
  holdBack: "idle" | "always";
}

export const TOKENFLOW_DEFAULTS: TokenFlowParams = {
  intervalS: 0.5,
  safety: 2,
  keepUp: false,
  overload: "admit",
  late: "by-slack",
  holdBack: "idle",
};

/** Seconds of playout in `req`'s buffer (0 for an unpaced reader). */
const bufferedS = (req: Request) => req.buffer.occupancy().seconds;

/** A request that has run before and waits to resume (as opposed to one never admitted). */
const isPaused = (req: Request) => req.state === "paused";

/** Far beyond any playout a buffer holds: a late request's slack with `late` "behind". */
const LATE_OFFSET_S = 1e6;

export function tokenflowPolicy(
  given: Partial<TokenFlowParams> = {},
): SchedulingPolicy {
  // Absent (undefined) options take their defaults.
  const params = Object.fromEntries(
    Object.entries(TOKENFLOW_DEFAULTS).map(([k, v]) => [k, given[k as keyof TokenFlowParams] ?? v]),
  ) as unknown as TokenFlowParams;
  const { intervalS: dt, safety: mu } = params;
  if (!(mu >= 1 && mu < Infinity)) throw new RangeError(`--tokenflow-safety: μ ≥ 1, got ${mu}`);
  if (!(dt > 0 && dt < Infinity)) {
    throw new RangeError(`--tokenflow-interval-s: Δt > 0 seconds, got ${dt}`);
  }

  const blocksOf = (req: Request, ctx: PolicyContext) =>
    Math.ceil(req.prefillTarget / ctx.blockSize);
  /** Ms to compute `tokens` positions in full prefill chunks. */
  const chunkedMs = (tokens: number, ctx: PolicyContext) =>
    Math.ceil(tokens / ctx.maxRows) * (ctx.stepMs(ctx.maxRows, 1) ?? 0);
  /** Seconds to move `req`'s KV out (0 when it is simply freed) and back in. */
  const switchCost = (req: Request, ctx: PolicyContext) => {
    const blocks = blocksOf(req, ctx);
    const copyOut = ctx.hostTier ? (ctx.copyMs("out", blocks) ?? 0) : 0;
    const copyIn = ctx.hostTier ? (ctx.copyMs("in", blocks) ?? Infinity) : Infinity;
    const recompute = chunkedMs(req.prefillTarget, ctx);
    return { outS: copyOut / 1000, inS: Math.min(copyIn, recompute) / 1000 };
  };
  /** Seconds of what is left of `req`'s prefill. */
  const prefillS = (req: Request, ctx: PolicyContext) =>
    chunkedMs(req.prefillTarget - req.computed, ctx) / 1000;
  const lowWater = (req: Request, ctx: PolicyContext) => mu * (switchCost(req, ctx).inS + dt);
  const margin = (req: Request, ctx: PolicyContext) => {
    const c = switchCost(req, ctx);
    return lowWater(req, ctx) + mu * (c.outS + c.inS);
  };
  /** Playout beyond which a request is made to wait (held, or paused for a waiting request). */
  const horizon = (req: Request, ctx: PolicyContext) => margin(req, ctx) + 3 * dt;
  /** A request that should run soon: never admitted yet, or paused with a nearly empty buffer. */
  const isDue = (req: Request, ctx: PolicyContext) =>
    !isPaused(req) || bufferedS(req) <= lowWater(req, ctx);

  /** Tokens/s each request gets when `n` run at once (null without a cost model). */
  const perRequestRate = (n: number, ctx: PolicyContext) => {
    const ms = ctx.stepMs(n, n);
    return ms === null ? null : 1000 / Math.max(ms, 1e-6);
  };
  /**
   * The tokens/s `req`'s reader asks of the adapter: its declared rate, or 0 (unpaced) when even a
   * batch of one cannot keep up with it (see the header). Its declared rate without a cost model.
   */
  const askedRate = (req: Request, ctx: PolicyContext) => {
    const alone = perRequestRate(1, ctx);
    return alone !== null && req.spec.readingRate > alone ? 0 : req.spec.readingRate;
  };
  /**
   * The working set (running and paused requests, plus `extra`) reads more tokens per second than
   * the adapter makes at the largest batch of them that fits in device memory.
   */
  const overloaded = (
    running: readonly Request[],
    waiting: readonly Request[],
    ctx: PolicyContext,
    extra = 0,
  ) => {
    const set = [...running, ...waiting.filter(isPaused)];
    const meanBlocks = set.reduce((s, r) => s + blocksOf(r, ctx), 0) / Math.max(1, set.length);
    const fit = ctx.blocksPerLayer === undefined || meanBlocks === 0
      ? ctx.maxSlots
      : Math.floor(ctx.blocksPerLayer / meanBlocks);
    const batch = Math.max(1, Math.min(ctx.maxSlots, fit));
    const rate = perRequestRate(batch, ctx);
    if (rate === null) return false;
    const demand = set.reduce((s, r) => s + askedRate(r, ctx), extra);
    return demand > rate * batch;
  };

  /** Waiting requests by urgency: least slack first (playout left, or time left to its TTFT). */
  const slack = (req: Request, ctx: PolicyContext) => {
    if (isPaused(req)) return bufferedS(req) - switchCost(req, ctx).inS;
    const ttft = req.spec.slo.ttftMs;
    const left = ttft === undefined ? 0 : (ttft - (ctx.now() - req.arrivedAt)) / 1000;
    // Behind: after every paused request (whose slack is playout, far below this), oldest first.
    return params.late === "behind" && left < 0 ? LATE_OFFSET_S - left : left;
  };

  function byUrgency(waiting: readonly Request[], ctx: PolicyContext): Request[] {
    const keyed = waiting.map((req, i) => ({ req, i, s: slack(req, ctx) }));
    keyed.sort((a, b) => a.s - b.s || a.i - b.i);
    return keyed.map((k) => k.req);
  }

  /** The admission gate: whether `req` may join `running` now. */
  function admits(req: Request, running: readonly Request[], ctx: PolicyContext): boolean {
    if (running.length === 0) return true;
    // Overloaded: with "hold", no new request joins (paused ones still resume, in urgency order).
    if (
      params.overload === "hold" && !isPaused(req) &&
      overloaded(running, [], ctx, askedRate(req, ctx))
    ) return false;
    if (!params.keepUp) return true;
    // Would one more make every step slower than the fastest reader among them?
    const rate = perRequestRate(running.length + 1, ctx);
    const fastest = Math.max(askedRate(req, ctx), ...running.map((r) => askedRate(r, ctx)));
    return rate === null || rate >= fastest;
  }

  return {
    name: "tokenflow",
    admissionTokens: fcfsPolicy.admissionTokens,
    // When a running request needs a block: the one with the most playout banked gives way.
    pickVictim: (running, needy) => {
      const most = running.reduce((a, b) => bufferedS(b) > bufferedS(a) ? b : a);
      return bufferedS(most) > 0 ? most : fcfsPolicy.pickVictim(running, needy);
    },

    order: byUrgency,

    mayAdmit: admits,

    // Just in time: a token made while its reader still has more than the useful horizon
    // buffered would only wait (and counts for nothing in effective throughput), so such a
    // request sits steps out, keeping its KV, until its buffer is back under the horizon.
    holdBack(running, ctx, waiting) {
      if (params.holdBack === "idle" && waiting.some((w) => isDue(w, ctx))) return new Set();
      return new Set(
        running.filter((r) =>
          r.state === "decoding" && askedRate(r, ctx) > 0 && bufferedS(r) >= horizon(r, ctx)
        ),
      );
    },

    pauseBeforeStep(running, waiting, ctx) {
      if (waiting.length === 0 || overloaded(running, waiting, ctx)) return [];
      // Room the pauses below free, less what the requests admitted in their place take.
      const freed = { slots: 0, blocks: 0 };
      const candidates = running.filter((r) => r.state === "decoding" && askedRate(r, ctx) > 0);
      const paused: Request[] = [];
      const staying = () => running.filter((r) => !paused.includes(r));
      for (const due of byUrgency(waiting, ctx).filter((r) => isDue(r, ctx))) {
        // A pause only pays if `due` is admitted in its place this very step, so this follows
        // the scheduler's admission: a request not ready yet (its last tokens or its swap-out
        // still in flight) is passed over; one the gate refuses, or that does not fit, ends it.
        if (!due.resumable) continue;
        const tokens = fcfsPolicy.admissionTokens(due);
        if (!fits(tokens, ctx, freed)) {
          // One rotation per step: every pause puts a swap-out into this step, which every
          // running reader waits for; a second due request gets its turn next step.
          if (paused.length > 0) return paused;
          while (!fits(tokens, ctx, freed)) {
            // The running request with the most playout, if it can afford to step out for `due`.
            const room = candidates
              .filter((r) => !paused.includes(r))
              .filter((r) =>
                isPaused(due)
                  ? bufferedS(r) >= margin(r, ctx) + dt && bufferedS(r) > bufferedS(due)
                  : bufferedS(r) >= horizon(r, ctx) + mu * prefillS(due, ctx)
              );
            // Not enough room even with every affordable pause: pause nobody for it.
            if (room.length === 0) return [];
            const victim = room.reduce((a, b) => bufferedS(b) > bufferedS(a) ? b : a);
            paused.push(victim);
            freed.slots++;
            freed.blocks += blocksOf(victim, ctx);
          }
          // Nobody else was paused this step (see above): these pauses are all for `due`.
          if (!admits(due, staying(), ctx)) return [];
        } else if (!admits(due, staying(), ctx)) return paused;
        freed.slots--;
        freed.blocks -= blocksOf(due, ctx);
      }
      return paused;
    },
  };
}

/** `--sched tokenflow`, with its own μ (`--tokenflow-safety`) and Δt (`--tokenflow-interval-s`). */
export const tokenflow: PresetEntry = {
  make: (o) =>
    makePreset(
      "tokenflow",
      tokenflowPolicy({
        safety: o.tokenflowSafety,
        intervalS: o.tokenflowIntervalS,
        keepUp: o.tokenflowKeepUp,
        overload: o.tokenflowOverload,
        late: o.tokenflowLate,
        holdBack: o.tokenflowHoldBack,
      }),
      o,
    ),
  takes: [
    "tokenflowSafety",
    "tokenflowIntervalS",
    "tokenflowKeepUp",
    "tokenflowOverload",
    "tokenflowLate",
    "tokenflowHoldBack",
    "layerwisePrefill",
  ],
};
