// LayerKV's SLO-aware scheduler (`--sched layerkv`; the paper's §3.1, Algorithm 1): fcfs's
// on-demand blocks and victims, but queued prefills are admitted, in order, only while their
// predicted time fits within every decoding request's TPOT slack:
//
//   Eq. 1  T_allow^i = T_tpot^i · (N_past^i + N_future^i) − (T_past^i + T_future^i)
//   Eq. 2  Σ_{k=1..n} T_prefill^{q_k} < min_i T_allow^i
//
// T_past is the time since request i's first token was made (waits between its tokens included),
// N_past the tokens made since then (TPOT is the mean gap: gaps, not tokens), T_future the
// current TPOT times N_future. TPOT averages over the whole request, so a request that has run
// faster than its SLO has banked slack a prefill may spend.
//
// This is the paper's rule as written. `--sched slo` keeps Sluice's stricter reading of it (every
// gap a reader sees within its TBT SLO, counting the playout in its buffer: slo.ts), which a
// per-token TBT SLO needs and a paced reader benefits from. Choices the paper leaves open:
//   - N_future is the lower bound of a predicted length bin less N_past, at least 1 (§3.1). Sluice
//     has no output-length classifier, and max_tokens is only a cap, so N_future = 1: the most
//     conservative bin;
//   - the current TPOT is the cost model's step time for the decode batch as it stands;
//   - T_prefill (Eq. 3's α-corrected FLOP count) is the cost model's prediction instead: what the
//     prefill's rows add to the steps they share with the decodes, for every prefill admitted
//     before it and still running, then its own (Eq. 2's sum);
//   - a request with no TPOT SLO imposes none; with no decoding request, the minimum over nobody
//     is infinite and the head is admitted; without a cost model the gate is open: exactly fcfs.

import type { Request } from "../request/request.ts";
import { fcfsPolicy } from "./fcfs.ts";
import type { SchedulingPolicy } from "./policy.ts";
import { makePreset, type PresetEntry } from "./preset.ts";
import { decodes, prefillRows, prefillSteps } from "./slo.ts";

/**
 * Eq. 1: the most prefill time decoding `req` can absorb now and still meet its TPOT SLO on
 * average, its future tokens at `tpotNowMs`; Infinity when it has no TPOT SLO.
 */
export function allowPrefillMs(req: Request, tpotNowMs: number, nowMs: number): number {
  const tpot = req.spec.slo.tbtMs;
  if (tpot === undefined) return Infinity;
  const { deposited, firstDepositAt } = req.buffer.stats();
  const nPast = Math.max(0, deposited - 1);
  const tPast = firstDepositAt === null ? 0 : nowMs - firstDepositAt;
  const nFuture = 1; // no length predictor: the lowest bin's bound (see above)
  return tpot * (nPast + nFuture) - (tPast + tpotNowMs * nFuture);
}

export const layerkvPolicy: SchedulingPolicy = {
  name: "layerkv",
  admissionTokens: fcfsPolicy.admissionTokens,
  pickVictim: fcfsPolicy.pickVictim,

  mayAdmit(req, running, ctx) {
    const decoding = running.filter((r) => decodes(r) && r.spec.slo.tbtMs !== undefined);
    if (decoding.length === 0) return true;
    // Prefilling requests decode by the time this prefill's rows run: count their decode rows.
    const decodeRows = running.filter((r) => decodes(r) || r.state === "prefilling").length;
    const tpotNow = ctx.stepMs(decodeRows, decodeRows);
    const rows = running.reduce((n, r) => n + r.prefillRowsLeft, prefillRows(req));
    const steps = prefillSteps(rows, decodeRows, ctx);
    if (steps === null || tpotNow === null) return true; // no cost model: fcfs
    // Eq. 2's left side: the prefills admitted before it, then its own, as time added to decodes.
    const prefillMs = steps.reduce((ms, s) => ms + s.count * (s.ms - tpotNow), 0);
    const now = ctx.now();
    return prefillMs < Math.min(...decoding.map((r) => allowPrefillMs(r, tpotNow, now)));
  },
};

/** `--sched layerkv`: Algorithm 1's admission, with LayerKV's layer-wise prefill (`--layerwise-prefill`). */
export const layerkv: PresetEntry = {
  make: (o) => makePreset("layerkv", layerkvPolicy, o),
  takes: ["layerwisePrefill"],
};
