// The runtime's side of the engine Worker: a StepEngine whose steps run on another thread.
// One message per step out, one per step back; nothing here waits on the GPU.

import type {
  EngineInfo,
  EngineOptions,
  KvCopyStats,
  StepEngine,
  StepPlan,
  StepRecords,
} from "./engine.ts";
import type { FromEngine, ToEngine } from "./worker_protocol.ts";

interface Pending {
  resolve: (records: StepRecords) => void;
  reject: (err: Error) => void;
}

export class WorkerEngine implements StepEngine {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closing: Promise<void> | null = null;
  private failure: Error | null = null;
  private stats: KvCopyStats = {
    steps: 0,
    out: { copies: 0, blocks: 0, bytes: 0 },
    in: { copies: 0, blocks: 0, bytes: 0 },
    prefetch: { copies: 0, blocks: 0, bytes: 0 },
  };

  private constructor(private readonly worker: Worker, readonly info: EngineInfo) {
    worker.onmessage = (e: MessageEvent<FromEngine>) => this.receive(e.data);
    worker.onerror = (e) => {
      e.preventDefault();
      this.failure = new Error(`engine worker failed: ${e.message}`);
      for (const p of this.pending.values()) p.reject(this.failure);
      this.pending.clear();
      this.onClosed();
    };
  }

  /** Starts the Worker and loads the model there; rejects with the load error. */
  static load(
    options: Omit<EngineOptions, "gpu" | "onLoadProgress">,
    onProgress?: (loaded: number, total: number) => void,
  ): Promise<WorkerEngine> {
    const worker = new Worker(new URL("./worker.ts", import.meta.url).href, { type: "module" });
    return new Promise((resolve, reject) => {
      worker.onerror = (e) => {
        e.preventDefault();
        worker.terminate();
        reject(new Error(`engine worker failed: ${e.message}`));
      };
      worker.onmessage = (e: MessageEvent<FromEngine>) => {
        const msg = e.data;
        if (msg.type === "progress") onProgress?.(msg.loaded, msg.total);
        else if (msg.type === "loaded") resolve(new WorkerEngine(worker, msg.info));
        else if (msg.type === "load-failed") {
          worker.terminate();
          reject(new Error(msg.message));
        }
      };
      worker.postMessage({ type: "load", options } satisfies ToEngine);
    });
  }

  step(plan: StepPlan): Promise<StepRecords> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.closing) return Promise.reject(new Error("engine is closed"));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ type: "step", id, plan } satisfies ToEngine);
    });
  }

  /** The engine's copy counters as of the last records received. */
  copyStats(): KvCopyStats {
    return this.stats;
  }

  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      this.onClosed = resolve;
      this.worker.postMessage({ type: "close" } satisfies ToEngine);
    }).then(() => this.worker.terminate());
    return this.closing;
  }

  private onClosed: () => void = () => {};

  private receive(msg: FromEngine): void {
    if (msg.type === "records" || msg.type === "step-failed") {
      const p = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      if (msg.type === "records") {
        this.stats = msg.copyStats;
        p?.resolve(msg.hidden ? Object.assign(msg.records, { hidden: msg.hidden }) : msg.records);
      } else p?.reject(new Error(msg.message));
    } else if (msg.type === "closed") {
      for (const p of this.pending.values()) p.reject(new Error("engine closed"));
      this.pending.clear();
      this.onClosed();
    }
  }
}
