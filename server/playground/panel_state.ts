// What the playground's live panel shows, as one JSON object: the models (which are loaded), the
// loaded chat models' queues, streams and KV tiers (runtime.stats(), summed over the models) beside
// the HTTP layer's TTFT and token counts (ServerMetrics). Counters
// are cumulative, so rates are taken between two samples a few seconds apart: the panel shows what
// the server does now, not an average since start.

import type { RequestState, RuntimeStats } from "../../runtime/service.ts";
import type { ServerMetrics } from "../metrics/server_metrics.ts";
import type { ServerState } from "../state/server_state.ts";

export type ServerStatus = "loading" | "failed" | "ready" | "draining";

export interface StreamState {
  id: number;
  state: RequestState;
  /** Tokens generated so far. */
  generated: number;
  /** Tokens in the request's token buffer, not yet sent, and the seconds of playout they cover. */
  buffered_tokens: number;
  buffered_seconds: number;
}

export interface PanelModel {
  id: string;
  status: "unloaded" | "loading" | "ready";
  pinned: boolean;
}

export interface PanelState {
  status: ServerStatus;
  /** The default model (what a request without `model` runs on). */
  model: string;
  models: PanelModel[];
  /** Null until the model is ready. */
  requests: { running: number; waiting: number; paused: number } | null;
  streams: StreamState[];
  kv_blocks: {
    device: { used: number; cached: number; total: number };
    host: { used: number; total: number };
  } | null;
  ttft_seconds: {
    /** Mean over the requests whose first token went out in the window; null if none did. */
    recent: number | null;
    /** Mean since the server started; null before the first token. */
    mean: number | null;
    count: number;
  };
  tokens_per_second: {
    /** Tokens the engine generated (all requests), over the window; null on the first sample. */
    generated: number | null;
    /** Tokens sent to clients, over the window; null on the first sample. */
    sent: number | null;
  };
  totals: { tokens_generated: number; tokens_sent: number; steps: number; preemptions: number };
  /** Seconds the rates span (0 on the first sample). */
  window_seconds: number;
}

/** Cumulative counts at one instant. */
interface Sample {
  atMs: number;
  generated: number;
  sent: number;
  ttftCount: number;
  ttftSum: number;
}

/** Builds PanelState snapshots, keeping the samples its rates need. */
export class PanelStateBuilder {
  /** Oldest first; the first one is the base the rates are taken from. */
  private samples: Sample[] = [];

  constructor(
    private readonly metrics: ServerMetrics,
    /** Rates span at least this long once the page has polled for this long. */
    private readonly windowMs = 5000,
    private readonly now: () => number = () => performance.now(),
  ) {}

  snapshot(state: ServerState): PanelState {
    const runtimes = state.model.status === "ready"
      ? state.models.loaded().flatMap(({ model }) => model.chat ? [model.chat.runtime] : [])
      : [];
    const stats = runtimes.length > 0 ? summed(runtimes.map((r) => r.stats())) : null;
    const ttft = this.metrics.m.ttft.get();
    const sent = ttft.count + this.metrics.m.interToken.get().count;
    const now: Sample = {
      atMs: this.now(),
      generated: stats?.tokensGenerated ?? 0,
      sent,
      ttftCount: ttft.count,
      ttftSum: ttft.sum,
    };
    const base = this.advance(now);
    const seconds = (now.atMs - base.atMs) / 1000;
    const rate = (grew: number) => (seconds > 0 ? Math.max(0, grew) / seconds : null);
    const ttftSeen = now.ttftCount - base.ttftCount;

    return {
      status: statusOf(state),
      model: state.models.defaultId ?? "",
      models: state.models.list().map((m) => ({ id: m.id, status: m.status, pinned: m.pinned })),
      requests: stats && { running: stats.running, waiting: stats.waiting, paused: stats.paused },
      streams: (stats?.requests ?? []).map((r) => ({
        id: r.id,
        state: r.state,
        generated: r.generated,
        buffered_tokens: r.buffered.tokens,
        buffered_seconds: r.buffered.seconds,
      })),
      kv_blocks: stats && {
        device: {
          used: stats.kvBlocksUsed,
          cached: stats.kvBlocksCached,
          total: stats.kvBlocksTotal,
        },
        host: { used: stats.hostBlocksUsed, total: stats.hostBlocksTotal },
      },
      ttft_seconds: {
        recent: ttftSeen > 0 ? (now.ttftSum - base.ttftSum) / ttftSeen : null,
        mean: ttft.count > 0 ? ttft.sum / ttft.count : null,
        count: ttft.count,
      },
      tokens_per_second: {
        generated: rate(now.generated - base.generated),
        sent: rate(now.sent - base.sent),
      },
      totals: {
        tokens_generated: now.generated,
        tokens_sent: sent,
        steps: stats?.steps ?? 0,
        preemptions: stats?.preemptions ?? 0,
      },
      window_seconds: seconds,
    };
  }

  /**
   * Records `now` (unless the last sample is very recent: a page polling fast must not grow the
   * list) and returns the base sample: the newest one at least a window old, else the oldest.
   */
  private advance(now: Sample): Sample {
    const last = this.samples.at(-1);
    if (!last || now.atMs - last.atMs >= this.windowMs / 20) this.samples.push(now);
    const cutoff = now.atMs - this.windowMs;
    while (this.samples.length > 1 && this.samples[1].atMs <= cutoff) this.samples.shift();
    return this.samples[0];
  }
}

/** The figures the panel reads, over every loaded model. */
type PanelStats = Pick<
  RuntimeStats,
  | "running"
  | "waiting"
  | "paused"
  | "requests"
  | "kvBlocksUsed"
  | "kvBlocksCached"
  | "kvBlocksTotal"
  | "hostBlocksUsed"
  | "hostBlocksTotal"
  | "tokensGenerated"
  | "steps"
  | "preemptions"
>;

function summed(all: RuntimeStats[]): PanelStats {
  const sum = (k: keyof PanelStats) => all.reduce((s, x) => s + (x[k] as number), 0);
  return {
    running: sum("running"),
    waiting: sum("waiting"),
    paused: sum("paused"),
    requests: all.flatMap((s) => s.requests),
    kvBlocksUsed: sum("kvBlocksUsed"),
    kvBlocksCached: sum("kvBlocksCached"),
    kvBlocksTotal: sum("kvBlocksTotal"),
    hostBlocksUsed: sum("hostBlocksUsed"),
    hostBlocksTotal: sum("hostBlocksTotal"),
    tokensGenerated: sum("tokensGenerated"),
    steps: sum("steps"),
    preemptions: sum("preemptions"),
  };
}

function statusOf(state: ServerState): ServerStatus {
  if (state.model.status !== "ready") return state.model.status;
  return state.draining ? "draining" : "ready";
}
