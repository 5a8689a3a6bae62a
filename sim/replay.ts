// A workload replayed through the real runtime in fake time: the scheduler, policies, pools, host
// tier, planner, pacer and token buffers all run as they do in the server, over an engine whose
// steps take what a cost model says. The clients are the bench's readers (a request's tokens
// reach them as the pacer releases them) and the bench's metrics judge them.

import type { StepEngine } from "../engine/engine.ts";
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
import FakeTimers from "@sinonjs/fake-timers";

/** A configuration: its name and the runtime options its flags stand for. */
export interface SimConfig {
  name: string;
  options: Omit<RuntimeOptions, "maxQueue" | "maxTokensLimit" | "eosIds">;
  /** Host KV tier blocks the configuration has (0: none). */
  hostBlocks: number;
}

export interface ReplayOptions {
  /** A client gives up on its request after this long (default 300 s). */
  timeoutMs?: number;
  /** Largest max_tokens a request may ask (default 4096). */
  maxTokensLimit?: number;
  parts?: RuntimeParts;
}

function promptIds(w: WorkloadRequest): number[] {
  if (w.promptIds) return w.promptIds;
  const rand = seededRandom(w.promptSeed ?? w.id);
  return Array.from({ length: w.promptLen ?? 1 }, () => 1 + Math.floor(rand() * 500));
}

/** Installs a fake clock over Date, timers and performance until `uninstall()`. */
export function fakeClock(now = 0) {
  return FakeTimers.install({
    now,
    toFake: ["Date", "setTimeout", "clearTimeout", "setInterval", "clearInterval", "performance"],
  });
}

/** Replays `workload` through a runtime of `config` over `engine`, in fake time: the clients'
 * records, and the runtime's counters at the end. `makeEngine` runs under the fake clock. */
export async function replay(
  workload: readonly WorkloadRequest[],
  makeEngine: () => StepEngine,
  config: SimConfig,
  o: ReplayOptions = {},
): Promise<{ records: RequestRecord[]; stats: RuntimeStats }> {
  const clock = fakeClock(0);
  const timeoutMs = o.timeoutMs ?? 300_000;
  try {
    const rt = new Runtime(makeEngine(), {
      ...config.options,
      maxQueue: 100_000,
      maxTokensLimit: o.maxTokensLimit ?? 4096,
      eosIds: [],
    }, o.parts);
    const records: RequestRecord[] = [];
    const done: Promise<void>[] = [];
    const t0 = Date.now();
    for (const w of [...workload].sort((a, b) => a.arrivalS - b.arrivalS)) {
      const wait = t0 + w.arrivalS * 1000 - Date.now();
      if (wait > 0) await clock.tickAsync(wait);
      done.push(client(rt, w, t0, timeoutMs).then((r) => void records.push(r)));
    }
    let settled = false;
    Promise.all(done).then(() => settled = true);
    while (!settled) await clock.tickAsync(100);
    const stats = rt.stats();
    await rt.close();
    return { records: records.sort((a, b) => a.id - b.id), stats };
  } finally {
    clock.uninstall();
  }
}

/** One reader: sends `w`, reads its tokens as they come, hangs up on timeout or as `w` says. */
async function client(
  rt: Runtime,
  w: WorkloadRequest,
  t0: number,
  timeoutMs: number,
): Promise<RequestRecord> {
  const sent = Date.now() - t0;
  const arrivals: number[] = [];
  const abort = new AbortController();
  const h = rt.submit({
    ids: promptIds(w),
    maxTokens: w.outputLen,
    sampling: { temperature: 0, topP: 1, topK: 0, seed: w.id },
    readingRate: w.readingRate >= 1000 ? 0 : w.readingRate,
    slo: { ttftMs: w.sloTtftMs, tbtMs: w.sloTbtMs },
    stopIds: [],
    signal: abort.signal,
  });
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  let outcome: RequestRecord["outcome"] = "ok";
  try {
    for await (const _ of h.tokens) {
      arrivals.push(Date.now() - t0 - sent);
      if (w.cancelAfterTokens !== undefined && arrivals.length >= w.cancelAfterTokens) {
        outcome = "cancelled";
        abort.abort();
        break;
      }
    }
    if (outcome === "ok") await h.done;
  } catch {
    if (outcome === "ok") outcome = abort.signal.aborted ? "timeout" : "failed";
  }
  clearTimeout(timer);
  return {
    id: w.id,
    outcome,
    sentAtMs: sent,
    endAtMs: Date.now() - t0,
    arrivalsMs: arrivals,
    displayMs: displayTimes(arrivals, w.readingRate),
    readingRate: w.readingRate,
    sloTtftMs: w.sloTtftMs,
    sloTbtMs: w.sloTbtMs,
    maxTokens: w.outputLen,
  };
}
