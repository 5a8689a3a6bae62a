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
  Runtime,
  type RuntimeOptions,
  type RuntimeParts,
  type RuntimeStats,
} from "../runtime/service.ts";
import { InlinePlanner } from "../runtime/bench_api.ts";

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
}

/** How long, in fake time, the runtime may take to settle what its clients left before the
 * simulation calls it stuck: a cancel settles a client's handle at once and is reaped at the next
 * step boundary, and the longest simulated step is a few seconds. */
const SETTLE_MS = 60_000;

/**
 * Replays `workload` through a runtime made of `config` over the engine `makeEngine` makes (under
 * the fake clock), in fake time: the clients' records, and the runtime's counters once every request has ended and been reaped (so the KV blocks they
 * count as used are blocks nobody should hold any more). Throws when the runtime does not settle.
 */
export async function replay(
  workload: readonly WorkloadRequest[],
  makeEngine: () => StepEngine,
  config: SimConfig,
  o: ReplayOptions = {},
): Promise<{ records: RequestRecord[]; stats: RuntimeStats }> {
  const { requestTimeoutMs = 300_000, deadlineMs } = o;
  const clock = fakeClock(0);
  try {
    const rt = new Runtime(makeEngine(), {
      ...config.options,
      maxQueue: o.maxQueue ?? 1000,
      maxTokensLimit: o.maxTokensLimit ?? 4096,
      eosIds: [],
    }, o.parts ?? { planSource: new InlinePlanner() });
    const records: RequestRecord[] = [];
    const done: Promise<void>[] = [];
    /** Each open client's hang-up, with why it gave up (its record's outcome). */
    const open = new Set<AbortController>();
    const t0 = Date.now();
    const deadline = deadlineMs === undefined ? undefined : setTimeout(() => {
      for (const c of open) c.abort("timeout");
    }, deadlineMs);
    for (const w of [...workload].sort((a, b) => a.arrivalS - b.arrivalS)) {
      const wait = t0 + w.arrivalS * 1000 - Date.now();
      if (wait > 0) await clock.tickAsync(wait);
      const sent = Date.now() - t0;
      const arrivals: number[] = [];
      // When each token entered the server's buffer, as the bench reads it from sluice_timing:
      // the pacer releases tokens at the reader's pace, so only these show a buffer filling up.
      const generated: number[] = [];
      const sentAt = performance.now();
      const record = (outcome: RequestRecord["outcome"]) =>
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
      // As the bench's: past the run's deadline a request is not sent, and counts as timed out.
      if (deadlineMs !== undefined && sent >= deadlineMs) {
        record("timeout");
        continue;
      }
      const hangUp = new AbortController();
      const giveUp = (why: "timeout" | "cancelled") => {
        if (!hangUp.signal.aborted) hangUp.abort(why);
      };
      open.add(hangUp);
      const h = rt.submit({
        ids: promptIds(w),
        maxTokens: w.outputLen,
        sampling: { temperature: 0, topP: 1, topK: 0, seed: w.id },
        readingRate: w.readingRate >= 1000 ? 0 : w.readingRate,
        slo: { ttftMs: w.sloTtftMs, tbtMs: w.sloTbtMs },
        stopIds: [],
        signal: hangUp.signal,
      });
      const timer = setTimeout(() => giveUp("timeout"), requestTimeoutMs);
      if (w.cancelAfterTokens === 0) giveUp("cancelled");
      done.push((async () => {
        let outcome: RequestRecord["outcome"] = "ok";
        try {
          for await (const token of h.tokens) {
            arrivals.push(Date.now() - t0 - sent);
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
        record(outcome);
      })());
    }
    // Every client ends by its timeout at the latest (the run's deadline may come first).
    const lastSent = Date.now();
    const limit = Math.min(lastSent + requestTimeoutMs, t0 + (deadlineMs ?? Infinity)) + SETTLE_MS;
    let settled = false;
    Promise.all(done).then(() => settled = true);
    await tickUntil(clock, () => settled, limit, () => `${open.size} client(s) still open`);
    clearTimeout(deadline);
    // Cancelled requests are reaped, and their blocks freed, at the runtime's next step boundary.
    await tickUntil(
      clock,
      () => rt.openRequests === 0,
      Date.now() + SETTLE_MS,
      () => `${rt.openRequests} request(s) never reaped`,
    );
    const stats = rt.stats();
    // Closing waits for the step in flight, which ends on the fake clock.
    let closed = false;
    rt.close().then(() => closed = true);
    await tickUntil(clock, () => closed, Date.now() + SETTLE_MS, () => "the runtime never closed");
    return { records: records.sort((a, b) => a.id - b.id), stats };
  } finally {
    clock.uninstall();
  }
}

type FakeClock = ReturnType<typeof fakeClock>;

/** Advances fake time until `ready()`; throws with `what()` once the clock passes `limit`. */
async function tickUntil(
  clock: FakeClock,
  ready: () => boolean,
  limit: number,
  what: () => string,
): Promise<void> {
  while (!ready()) {
    if (Date.now() > limit) throw new Error(`replay: ${what()} at ${Date.now()} ms`);
    await clock.tickAsync(100);
  }
}
