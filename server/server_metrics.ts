// Feeds Sluice's Prometheus metrics from the HTTP layer (requests, TTFT, inter-token gaps, pacer
// stalls) and from engine stats sampled at scrape time.

import type { Runtime } from "../runtime/service.ts";
import { createSluiceMetrics, Registry, type SluiceMetrics } from "./metrics.ts";

/** Tracks one request's client-visible timing. */
export interface RequestObserver {
  /** Call as each token is released to the client. */
  token(): void;
  /** Tokens released so far. */
  readonly tokens: number;
  /** Counts the request by final status and closes it; later calls do nothing. */
  finish(status: number): void;
}

export class ServerMetrics {
  private readonly registry = new Registry();
  readonly m: SluiceMetrics = createSluiceMetrics(this.registry);
  /** Streams not yet finished; graceful shutdown waits for this to reach zero. */
  openStreams = 0;
  private lastEngineTokens = 0;

  requestStarted(arrivedMs: number): RequestObserver {
    this.openStreams++;
    const m = this.m;
    let last = -1;
    let tokens = 0;
    let finished = false;
    return {
      finish: (status: number) => {
        if (finished) return;
        finished = true;
        this.openStreams--;
        this.requestFinished(status);
      },
      token() {
        const now = performance.now();
        if (last < 0) m.ttft.observe((now - arrivedMs) / 1000);
        else m.interToken.observe((now - last) / 1000);
        last = now;
        tokens++;
      },
      get tokens() {
        return tokens;
      },
    };
  }

  /** Counts a finished request by HTTP status. */
  requestFinished(status: number): void {
    this.m.requests.inc({ status: String(status) });
  }

  recordStall(seconds: number): void {
    if (seconds > 0) this.m.stallSeconds.inc(seconds);
  }

  observeRuntime(runtime: Runtime): void {
    const s = runtime.stats();
    this.m.queueDepth.set(s.waiting);
    this.m.runningRequests.set(s.running);
    this.m.kvBlocksUsed.set({ tier: "device" }, s.kvBlocksUsed);
    this.m.kvBlocksTotal.set({ tier: "device" }, s.kvBlocksTotal);
    if (s.tokensGenerated > this.lastEngineTokens) {
      this.m.tokensGenerated.inc(s.tokensGenerated - this.lastEngineTokens);
    }
    this.lastEngineTokens = s.tokensGenerated;
    for (const ms of runtime.takeStepTimes()) this.m.stepSeconds.observe(ms / 1000);
  }

  render(): string {
    return this.registry.render();
  }
}
