// A workload replayed through the real runtime in fake time: the scheduler, policies, pools, host
// tier, planner, pacer and token buffers all run as they do in the server, over an engine whose
// steps take what a cost model says. The clients are the bench's readers (a request's tokens
// reach them as the pacer releases them, and they give up as the bench's do) and the bench's
// metrics judge them.

import type { StepEngine } from "../engine/engine.ts";
import { fakeClock } from "./fake_clock.ts";
import { displayTimes } from "../bench/serve/playout.ts";
import { seededRandom } from "../bench/serve/random.ts";
import type { RequestRecord } from "../bench/serve/record.ts";
import type { WorkloadRequest } from "../bench/serve/workload.ts";
import {
  type RequestHandle,
  Runtime,
  type RuntimeOptions,
  type RuntimeParts,
  type RuntimeStats,
} from "../runtime/service.ts";
import { InlinePlanner } from "../runtime/bench_api.ts";
import type { ChurnTarget, PriorityChurn } from "./priority_churn.ts";

/**
 * A request of the workload; a follow-up turn of a conversation names the turn it follows. It is
 * sent `thinkS` after that turn's stream ends (its `arrivalS` is not read), and its prompt is that
 * turn's prompt, the tokens its reader received, then its own `promptLen` new tokens: the next
 * turn of a chat, whose prefix is the whole conversation so far.
 */
export interface SimRequest extends WorkloadRequest {
  after?: { id: number; thinkS: number };
}

/** A configuration: its name and the runtime options its flags stand for. */
export interface SimConfig {
  name: string;
  options: Omit<RuntimeOptions, "maxQueue" | "maxTokensLimit" | "eosIds">;
  /** Host KV tier blocks the configuration has (0: none). */
  hostBlocks: number;
}

function promptIds(w: WorkloadRequest): number[] {
  if (w.promptIds) return w.promptIds;
  const rand = seededRandom(w.promptSeed ?? w.id);
  return Array.from({ length: w.promptLen ?? 1 }, () => 1 + Math.floor(rand() * 500));
}

/**
 * How the simulated clients give up, as the serving bench's do (bench/serve/client.ts and run.ts):
 * each after its own timeout, every one still open at the run's deadline, and a reader that hangs
 * up after the workload's `cancelAfterTokens`. A capacity sweep past capacity ends most requests
 * this way.
 */
export interface SimClients {
  /** Each request's timeout from when it is sent (default 300 s). */
  requestTimeoutMs?: number;
  /** The whole run's deadline, ms after it starts (default: none). */
  deadlineMs?: number;
}

export interface ReplayOptions extends SimClients {
  /** Requests the runtime queues before it refuses more (default 1000). */
  maxQueue?: number;
  /** Largest max_tokens a request may ask (default 4096). */
  maxTokensLimit?: number;
  /**
   * What the runtime is given beyond its options (an offload planner of the caller's). Default:
   * OrbitFlow's planner solves inline, since its Worker runs on the wall clock, which fake time
   * outruns, so its plans would land at steps that differ from run to run.
   */
  parts?: RuntimeParts;
  /** Priorities that change while requests run (FastSwitch's churn; default: fixed, all 0). */
  churn?: PriorityChurn;
}

/** How long, in fake time, the runtime may take to settle what its clients left before the
 * simulation calls it stuck: a cancel settles a client's handle at once and is reaped at the next
 * step boundary, and the longest simulated step is a few seconds. */
const SETTLE_MS = 60_000;

/**
 * Replays `workload` through a runtime made of `config` over the engine `makeEngine` makes (under
 * the fake clock), in fake time: the clients' records, and the runtime's counters once every
 * request has ended and been reaped (so the KV blocks they count as used are blocks nobody should
 * hold any more). Throws when the runtime does not settle.
 */
export async function replay(
  workload: readonly SimRequest[],
  makeEngine: () => StepEngine,
  config: SimConfig,
  o: ReplayOptions = {},
): Promise<{ records: RequestRecord[]; stats: RuntimeStats }> {
  const { requestTimeoutMs = 300_000, deadlineMs, churn } = o;
  const clock = fakeClock(0);
  try {
    /** The open requests the churn may change: their handles and what they have received. */
    const live = new Map<number, ChurnTarget & { handle: RequestHandle }>();
    let steps = 0;
    const engine = makeEngine();
    const rt = new Runtime(
      churn
        ? countingSteps(engine, () => {
          if (++steps % churn.everySteps !== 0) return;
          const next = churn.update([...live.values()]);
          for (const r of live.values()) {
            r.servedSinceUpdate = 0;
            const p = next.get(r.id);
            if (p !== undefined && p !== r.priority && r.handle.setPriority(p)) r.priority = p;
          }
        })
        : engine,
      {
        ...config.options,
        maxQueue: o.maxQueue ?? 1000,
        maxTokensLimit: o.maxTokensLimit ?? 4096,
        eosIds: [],
      },
      o.parts ?? { planSource: new InlinePlanner() },
    );
    const records: RequestRecord[] = [];
    /** Each open client's hang-up, with why it gave up (its record's outcome). */
    const open = new Set<AbortController>();
    const t0 = Date.now();
    let lastSent = t0;
    const deadline = deadlineMs === undefined ? undefined : setTimeout(() => {
      for (const c of open) c.abort("timeout");
    }, deadlineMs);
    const followUps = new Map<number, SimRequest>();
    for (const w of workload) if (w.after) followUps.set(w.after.id, w);

    const send = (w: SimRequest, ids: number[]) => {
      const sent = Date.now() - t0;
      lastSent = Date.now();
      const arrivals: number[] = [];
      const received: number[] = [];
      // When each token entered the server's buffer, as the bench reads it from sluice_timing:
      // the pacer releases tokens at the reader's pace, so only these show a buffer filling up.
      const generated: number[] = [];
      const sentAt = performance.now();
      const record = (outcome: RequestRecord["outcome"]) => {
        records.push({
          id: w.id,
          outcome,
          sentAtMs: sent,
          endAtMs: Date.now() - t0,
          arrivalsMs: arrivals,
          displayMs: displayTimes(arrivals, w.readingRate),
          generatedMs: generated,
          readingRate: w.readingRate,
          sloTtftMs: w.sloTtftMs,
          sloTbtMs: w.sloTbtMs,
          maxTokens: w.outputLen,
        });
        const next = followUps.get(w.id);
        if (next) {
          setTimeout(
            () => send(next, [...ids, ...received, ...promptIds(next)]),
            next.after!.thinkS * 1000,
          );
        }
      };
      // As the bench's: past the run's deadline a request is not sent, and counts as timed out.
      if (deadlineMs !== undefined && sent >= deadlineMs) {
        record("timeout");
        return;
      }
      const hangUp = new AbortController();
      const giveUp = (why: "timeout" | "cancelled") => {
        if (!hangUp.signal.aborted) hangUp.abort(why);
      };
      open.add(hangUp);
      const priority = churn?.initial(w.id);
      const h = rt.submit({
        ids,
        maxTokens: w.outputLen,
        sampling: { temperature: 0, topP: 1, topK: 0, seed: w.id },
        readingRate: w.readingRate >= 1000 ? 0 : w.readingRate,
        slo: { ttftMs: w.sloTtftMs, tbtMs: w.sloTbtMs },
        stopIds: [],
        signal: hangUp.signal,
        ...(priority === undefined ? {} : { priority }),
      });
      const target = { id: w.id, priority: priority ?? 0, servedSinceUpdate: 0, handle: h };
      if (churn) live.set(w.id, target);
      const timer = setTimeout(() => giveUp("timeout"), requestTimeoutMs);
      if (w.cancelAfterTokens === 0) giveUp("cancelled");
      (async () => {
        let outcome: RequestRecord["outcome"] = "ok";
        try {
          for await (const token of h.tokens) {
            arrivals.push(Date.now() - t0 - sent);
            received.push(token.id);
            target.servedSinceUpdate++;
            generated.push(token.generatedAt - sentAt);
            if (arrivals.length === w.cancelAfterTokens) giveUp("cancelled");
          }
          const finish = await h.done;
          if (finish.reason === "error" || finish.reason === "shutdown") outcome = "failed";
        } catch {
          outcome = "failed";
        }
        // A client that gave up ended the stream itself, whatever the runtime said of it.
        if (hangUp.signal.aborted) outcome = hangUp.signal.reason;
        clearTimeout(timer);
        open.delete(hangUp);
        live.delete(w.id);
        record(outcome);
      })();
    };

    for (const w of workload.filter((w) => !w.after).sort((a, b) => a.arrivalS - b.arrivalS)) {
      const wait = t0 + w.arrivalS * 1000 - Date.now();
      if (wait > 0) await clock.tickAsync(wait);
      send(w, promptIds(w));
    }
    // Every client ends by its timeout at the latest (the run's deadline may come first); a
    // follow-up turn is sent once the turn before it ends, so the limit moves with the last send.
    const limit = () =>
      Math.min(lastSent + requestTimeoutMs, t0 + (deadlineMs ?? Infinity)) + SETTLE_MS;
    await tickUntil(
      clock,
      () => records.length === workload.length,
      limit,
      () => `${open.size} client(s) still open`,
    );
    clearTimeout(deadline);
    // Cancelled requests are reaped, and their blocks freed, at the runtime's next step boundary.
    const reapBy = Date.now() + SETTLE_MS;
    await tickUntil(
      clock,
      () => rt.openRequests === 0,
      () => reapBy,
      () => `${rt.openRequests} request(s) never reaped`,
    );
    const stats = rt.stats();
    // Closing waits for the step in flight, which ends on the fake clock.
    let closed = false;
    rt.close().then(() => closed = true);
    const closeBy = Date.now() + SETTLE_MS;
    await tickUntil(clock, () => closed, () => closeBy, () => "the runtime never closed");
    return { records: records.sort((a, b) => a.id - b.id), stats };
  } finally {
    clock.uninstall();
  }
}

/** `engine`, calling `onStep` as each step is submitted (the churn counts iterations by it). */
function countingSteps(engine: StepEngine, onStep: () => void): StepEngine {
  return {
    get info() {
      return engine.info;
    },
    step(plan) {
      onStep();
      return engine.step(plan);
    },
    ...(engine.copyStats ? { copyStats: () => engine.copyStats!() } : {}),
    close: () => engine.close(),
  };
}

type FakeClock = ReturnType<typeof fakeClock>;

/** Advances fake time until `ready()`; throws with `what()` once the clock passes `limit`. */
async function tickUntil(
  clock: FakeClock,
  ready: () => boolean,
  limit: () => number,
  what: () => string,
): Promise<void> {
  while (!ready()) {
    if (Date.now() > limit()) throw new Error(`replay: ${what()} at ${Date.now()} ms`);
    await clock.tickAsync(100);
  }
}
