// Feeds Sluice's Prometheus metrics, and the vLLM-named ones that tools built for vLLM read, from
// the HTTP layer (requests by status, TTFT, inter-token gaps, end-to-end latency, pacer stalls)
// and from the runtime's stats, sampled at scrape time.

import type { ModelRouter } from "../../runtime/model_router.ts";
import type { Runtime } from "../../runtime/service.ts";
import type { ConnectionEvent } from "../connections/front_door.ts";
import { Registry } from "./exposition.ts";
import { createSluiceMetrics, type SluiceMetrics } from "./sluice_metrics.ts";
import { createVllmMetrics, type VllmMetrics } from "./vllm_metrics.ts";

/** Tracks one HTTP request from arrival to its final status. */
export interface RequestObserver {
  /** When the request arrived (performance.now() ms, the runtime's clock). */
  readonly arrivedMs: number;
  /** Call as each token is released to the client. */
  token(): void;
  /** Tokens released so far. */
  readonly tokens: number;
  /** Seconds the request's token buffer sat empty while a token was due. */
  stalled(seconds: number): void;
  /** Marks a generation request (submitted to the runtime): its end-to-end latency counts. */
  generating(): void;
  /**
   * The response body outlives the handler (a stream): whoever writes it calls finish(), and the
   * middleware that opened the observer leaves it alone.
   */
  keepOpen(): void;
  readonly keptOpen: boolean;
  /** Counts the request by final status and closes it; later calls do nothing. */
  finish(status: number): void;
  /** The model the request runs on: its vLLM metrics' model_name from now on. */
  model(id: string): void;
}

/** What the metrics read of the runtime at each scrape (solve times: with an offload planner). */
export type RuntimeView =
  & Pick<Runtime, "stats" | "takeStepTimes">
  & Partial<Pick<Runtime, "takeSolveTimes">>;

/** What the metrics read of the model router. */
export type ModelsView = Pick<ModelRouter, "loaded" | "ids" | "counts">;

/** Runtime counters as of the last scrape, so each scrape adds what grew since. */
const ZERO_COUNTERS = {
  tokensGenerated: 0,
  preemptions: 0,
  policyPauses: 0,
  layerwiseAdmissions: 0,
  swapsOut: 0,
  swapsIn: 0,
  bytesOut: 0,
  bytesIn: 0,
  prefixHits: 0,
  prefixHostHits: 0,
  prefixLookups: 0,
  plannerSolves: 0,
  recomputedTokens: 0,
  effectiveTokens: 0,
  choseSwap: 0,
  choseDropOldest: 0,
  choseDropAll: 0,
  specDrafts: 0,
  specDraftTokens: 0,
  specAcceptedTokens: 0,
};

export class ServerMetrics {
  private readonly registry = new Registry();
  readonly m: SluiceMetrics = createSluiceMetrics(this.registry);
  /** vLLM's names, labelled with `model_name`. */
  readonly vllm: VllmMetrics;
  /** The default model's label (a request's until it names its model: RequestObserver.model). */
  private readonly model: { model_name: string };
  /** Requests not yet finished; graceful shutdown waits for this to reach zero. */
  openRequests = 0;
  /** Each model's runtime counters at the last scrape, to add what grew since. */
  private readonly last = new Map<string, typeof ZERO_COUNTERS>();
  /** Each model's speculative acceptances per draft position at the last scrape. */
  private readonly lastPerPos = new Map<string, number[]>();
  private routerCounts = { loads: 0, unloads: 0 };

  /** `modelName`: the id clients pass as `model`, the vLLM metrics' `model_name` label. */
  constructor(modelName = "default") {
    this.model = { model_name: modelName };
    this.vllm = createVllmMetrics(this.registry, modelName);
  }

  requestStarted(arrivedMs = performance.now()): RequestObserver {
    this.openRequests++;
    const { m, vllm } = this;
    let model = this.model;
    let last = -1;
    let tokens = 0;
    let finished = false;
    let keptOpen = false;
    let generating = false;
    return {
      arrivedMs,
      finish: (status: number) => {
        if (finished) return;
        finished = true;
        this.openRequests--;
        m.requests.inc({ status: String(status) });
        if (generating && status === 200) {
          vllm.e2e.observe(model, (performance.now() - arrivedMs) / 1000);
        }
      },
      token() {
        const now = performance.now();
        if (last < 0) {
          const ttft = (now - arrivedMs) / 1000;
          m.ttft.observe(ttft);
          vllm.ttft.observe(model, ttft);
        } else {
          const gap = (now - last) / 1000;
          m.interToken.observe(gap);
          vllm.interToken.observe(model, gap);
        }
        last = now;
        tokens++;
      },
      generating() {
        generating = true;
      },
      model(id: string) {
        vllm.ensure(id);
        model = { model_name: id };
      },
      stalled(seconds: number) {
        if (seconds > 0) m.stallSeconds.inc(seconds);
      },
      keepOpen() {
        keptOpen = true;
      },
      get keptOpen() {
        return keptOpen;
      },
      get tokens() {
        return tokens;
      },
    };
  }

  /** Samples the one runtime of a single-model server (tests): as observeRuntimes. */
  observeRuntime(runtime: RuntimeView): void {
    this.observeRuntimes([{ id: this.model.model_name, runtime }]);
  }

  /** Samples every loaded chat model, and which models are loaded. */
  observeModels(router: ModelsView): void {
    const loaded = router.loaded();
    for (const id of router.ids) {
      this.m.modelLoaded.set({ model: id }, loaded.some((l) => l.id === id) ? 1 : 0);
    }
    this.m.modelLoads.inc(Math.max(0, router.counts.loads - this.routerCounts.loads));
    this.m.modelUnloads.inc(Math.max(0, router.counts.unloads - this.routerCounts.unloads));
    this.routerCounts = { ...router.counts };
    this.observeRuntimes(
      loaded.flatMap(({ id, model }) => model.chat ? [{ id, runtime: model.chat.runtime }] : []),
    );
  }

  /**
   * Samples runtimes: Sluice's queue, batch and KV gauges summed over them, vLLM's per model
   * (`model_name`), and what each one's counters added since its last scrape.
   */
  observeRuntimes(runtimes: { id: string; runtime: RuntimeView }[]): void {
    const m = this.m;
    const all = runtimes.map(({ id, runtime }) => ({ id, runtime, s: runtime.stats() }));
    const sum = (f: (s: ReturnType<RuntimeView["stats"]>) => number) =>
      all.reduce((total, x) => total + f(x.s), 0);
    m.queueDepth.set(sum((s) => s.waiting));
    m.runningRequests.set(sum((s) => s.running));
    m.pausedRequests.set(sum((s) => s.paused));
    m.kvBlocksUsed.set({ tier: "device" }, sum((s) => s.kvBlocksUsed));
    m.kvBlocksTotal.set({ tier: "device" }, sum((s) => s.kvBlocksTotal));
    m.kvBlocksUsed.set({ tier: "host" }, sum((s) => s.hostBlocksUsed));
    m.kvBlocksTotal.set({ tier: "host" }, sum((s) => s.hostBlocksTotal));
    m.kvBlocksCached.set(sum((s) => s.kvBlocksCached));
    const vllm = this.vllm;
    for (const id of [...this.last.keys()]) {
      if (all.some((x) => x.id === id)) continue;
      // An unloaded model: nothing runs; its counters start again from zero if it comes back.
      const label = { model_name: id };
      vllm.running.set(label, 0);
      vllm.waiting.set(label, 0);
      vllm.kvCacheUsage.set(label, 0);
      this.last.delete(id);
      this.lastPerPos.delete(id);
    }
    for (const { id, runtime, s } of all) {
      const label = { model_name: id };
      vllm.ensure(id);
      vllm.running.set(label, s.running);
      vllm.waiting.set(label, s.waiting + s.paused); // vLLM requeues preempted requests
      vllm.kvCacheUsage.set(label, s.kvBlocksTotal > 0 ? s.kvBlocksUsed / s.kvBlocksTotal : 0);
      const now = {
        tokensGenerated: s.tokensGenerated,
        preemptions: s.preemptions,
        policyPauses: s.policyPauses,
        layerwiseAdmissions: s.layerwiseAdmissions ?? 0,
        swapsOut: s.swaps?.swapsOut ?? 0,
        swapsIn: s.swaps?.swapsIn ?? 0,
        bytesOut: s.kvBytesMoved.out,
        bytesIn: s.kvBytesMoved.in,
        prefixHits: s.prefix?.hitBlocks ?? 0,
        prefixHostHits: s.prefix?.hostHitBlocks ?? 0,
        prefixLookups: s.prefix?.lookupBlocks ?? 0,
        plannerSolves: s.planner?.solves ?? 0,
        recomputedTokens: s.recomputedTokens,
        effectiveTokens: s.effectiveTokens,
        choseSwap: s.preemptChoices.swap,
        choseDropOldest: s.preemptChoices.dropOldest,
        choseDropAll: s.preemptChoices.dropAll,
        specDrafts: s.speculation?.drafts ?? 0,
        specDraftTokens: s.speculation?.draftTokens ?? 0,
        specAcceptedTokens: s.speculation?.acceptedTokens ?? 0,
      };
      const before = this.last.get(id) ?? ZERO_COUNTERS;
      const grew = (k: keyof typeof now) => Math.max(0, now[k] - before[k]);
      m.tokensGenerated.inc(grew("tokensGenerated"));
      m.preemptions.inc(grew("preemptions"));
      vllm.preemptions.inc(label, grew("preemptions"));
      m.policyPauses.inc(grew("policyPauses"));
      m.layerwiseAdmissions.inc(grew("layerwiseAdmissions"));
      m.swaps.inc({ direction: "out" }, grew("swapsOut"));
      m.swaps.inc({ direction: "in" }, grew("swapsIn"));
      m.kvBytesMoved.inc({ direction: "out" }, grew("bytesOut"));
      m.kvBytesMoved.inc({ direction: "in" }, grew("bytesIn"));
      const hostHits = grew("prefixHostHits");
      m.prefixHitBlocks.inc({ tier: "device" }, Math.max(0, grew("prefixHits") - hostHits));
      m.prefixHitBlocks.inc({ tier: "host" }, hostHits);
      m.prefixLookupBlocks.inc(grew("prefixLookups"));
      m.plannerSolves.inc(grew("plannerSolves"));
      m.recomputedTokens.inc(grew("recomputedTokens"));
      m.effectiveTokens.inc(grew("effectiveTokens"));
      m.preemptChoices.inc({ kind: "swap" }, grew("choseSwap"));
      m.preemptChoices.inc({ kind: "drop_oldest" }, grew("choseDropOldest"));
      m.preemptChoices.inc({ kind: "drop_all" }, grew("choseDropAll"));
      vllm.specDrafts.inc(label, grew("specDrafts"));
      vllm.specDraftTokens.inc(label, grew("specDraftTokens"));
      vllm.specAcceptedTokens.inc(label, grew("specAcceptedTokens"));
      const perPos = s.speculation?.acceptedPerPos ?? [];
      const perPosBefore = this.lastPerPos.get(id) ?? [];
      perPos.forEach((n, position) => {
        const grown = Math.max(0, n - (perPosBefore[position] ?? 0));
        vllm.specAcceptedPerPos.inc({ ...label, position: String(position) }, grown);
      });
      this.lastPerPos.set(id, [...perPos]);
      this.last.set(id, now);
      for (const ms of runtime.takeStepTimes()) m.stepSeconds.observe(ms / 1000);
      for (const ms of runtime.takeSolveTimes?.() ?? []) m.plannerSolveSeconds.observe(ms / 1000);
    }
  }

  /** Counts what the front door reports of its connections. */
  connectionEvent(event: ConnectionEvent): void {
    const { m } = this;
    if (event.kind === "opened") m.connections.inc();
    else if (event.kind === "closed") {
      m.connections.dec();
      m.connectionsClosed.inc({ reason: event.reason });
    } else m.connectionsRefused.inc({ reason: event.reason });
  }

  render(): string {
    return this.registry.render();
  }
}
