// Many models behind one server. A request names a model; the router loads it on first use (two
// requests for a cold model share one load), keeps it while it is used, unloads it after its
// keep-alive, and, when a load would pass the number of loaded models or the device budget,
// evicts the least recently used model that is neither pinned nor busy. A busy model (a request
// holding a lease, or requests in its runtime, streams included) is never cut off: a load that
// needs its room waits until it is idle. Pinned models are loaded at start and never unloaded.
//
// Time is ms on `now()` (performance.now by default); keep-alive timers are plain setTimeout, so
// tests run with short keep-alives. Loading itself (the files, the GPU) is `open`'s.

import type { LoadedModel } from "./loaded_model.ts";
import { modelVictim } from "./models/eviction.ts";

// The router is the server's second face of the runtime (service.ts runs requests; this says which
// model runs them): what the routes need of a model comes through here.
export { chatModel, type ChatParts, type LoadedModel } from "./loaded_model.ts";
export { goDurationMs, keepAliveMs } from "./models/keep_alive.ts";
export type {
  Embedder,
  EmbeddingInput,
  Embeddings,
  EmbedOptions,
  ModelKind,
  Relevance,
  Reranker,
} from "./embedding/embedder.ts";

/** A model the server can serve, found by the catalog (engine/sources/model_catalog.ts). */
export interface ModelEntry {
  /** The id clients name it by. */
  id: string;
  /** What opens it: a directory, a .gguf file, or a --model argument. */
  source: string;
  /** Other names it answers to. */
  aliases: string[];
  /** Its weights' bytes on disk: the device budget's estimate before it is loaded. */
  sizeBytes: number;
}

export interface RouterOptions {
  open(entry: ModelEntry): Promise<LoadedModel>;
  /** Idle ms before a model is unloaded (Infinity: never; 0: as soon as it is idle). */
  keepAliveMs: number;
  /** Models loaded at once. */
  maxLoaded: number;
  /** Device bytes all loaded models may hold together (weights and KV); null: no budget. */
  deviceBudgetBytes: number | null;
  /** Device bytes a model adds besides its weights' files (its KV pool), for the estimate. */
  extraDeviceBytes: number;
  /** Ids loaded at start and never unloaded. */
  pinned: string[];
  log?: (message: string) => void;
  now?: () => number;
  /** How often a waiting load looks again for room, and a busy model for its end (ms). */
  pollMs?: number;
}

/** Why a name is not served: the ids that are. */
export class UnknownModel extends Error {
  constructor(readonly requested: string, readonly ids: string[]) {
    super(`The model '${requested}' does not exist; this server serves: ${ids.join(", ")}`);
    this.name = "UnknownModel";
  }
}

/** The load failed (the next request tries again). */
export class ModelUnavailable extends Error {
  constructor(readonly id: string, message: string, readonly reason: "failed" | "no_room") {
    super(message);
    this.name = "ModelUnavailable";
  }
}

export type ModelStatus = "unloaded" | "loading" | "ready";

/** One model as /v1/models, /api/tags and /api/ps show it. */
export interface ModelListing {
  id: string;
  aliases: string[];
  source: string;
  sizeBytes: number;
  status: ModelStatus;
  pinned: boolean;
  kind: LoadedModel["kind"] | null;
  deviceBytes: number;
  hostBytes: number;
  /** When it will be unloaded if nothing uses it (ms on now()); null: never or not loaded. */
  expiresAtMs: number | null;
  lastError: string | null;
}

/** A model held for one request; release it when the request has been handed to the model. */
export interface ModelLease {
  id: string;
  model: LoadedModel;
  release(): void;
}

export interface AcquireOptions {
  /** This request's keep-alive (Ollama's keep_alive), kept as the model's from now on. */
  keepAliveMs?: number;
}

interface Slot {
  entry: ModelEntry;
  status: ModelStatus;
  model: LoadedModel | null;
  loading: Promise<LoadedModel> | null;
  leases: number;
  lastUsedMs: number;
  keepAliveMs: number;
  timer: ReturnType<typeof setTimeout> | undefined;
  expiresAtMs: number | null;
  lastError: string | null;
}

export class ModelRouter {
  private readonly slots = new Map<string, Slot>();
  private readonly names = new Map<string, string>();
  private readonly now: () => number;
  private readonly pollMs: number;
  private closed = false;
  /** Loads and unloads done (for /metrics and tests). */
  readonly counts = { loads: 0, unloads: 0, evictions: 0 };

  constructor(entries: ModelEntry[], private readonly options: RouterOptions) {
    this.now = options.now ?? (() => performance.now());
    this.pollMs = options.pollMs ?? 100;
    for (const entry of entries) {
      if (this.names.has(entry.id)) throw new Error(`two models have the id '${entry.id}'`);
      this.slots.set(entry.id, {
        entry,
        status: "unloaded",
        model: null,
        loading: null,
        leases: 0,
        lastUsedMs: 0,
        keepAliveMs: options.keepAliveMs,
        timer: undefined,
        expiresAtMs: null,
        lastError: null,
      });
      for (const name of [entry.id, ...entry.aliases]) {
        if (!this.names.has(name)) this.names.set(name, entry.id);
      }
    }
    for (const id of options.pinned) this.idOf(id);
  }

  /** The first model: what "default" and a request without `model` mean. */
  get defaultId(): string | null {
    return this.slots.keys().next().value ?? null;
  }

  get ids(): string[] {
    return [...this.slots.keys()];
  }

  /** The id a request's name stands for (an alias, "default", or Ollama's ":latest" form). */
  idOf(requested: string | null | undefined): string {
    const name = requested ?? "default";
    const id = name === "default" ? this.defaultId : this.names.get(name) ??
      (name.endsWith(":latest") ? this.names.get(name.slice(0, -":latest".length)) : undefined);
    if (id == null) throw new UnknownModel(name, this.ids);
    return id;
  }

  /** Whether the model a name stands for is loaded now (false while it loads). */
  isLoaded(requested: string | null | undefined): boolean {
    return this.slots.get(this.idOf(requested))!.status === "ready";
  }

  /** Loads the pinned models (at start). */
  async loadPinned(): Promise<void> {
    for (const id of this.options.pinned) (await this.acquire(id)).release();
  }

  /** The model a request names, loaded (waiting for its load, or for room to load it). */
  async acquire(
    requested: string | null | undefined,
    opts: AcquireOptions = {},
  ): Promise<ModelLease> {
    if (this.closed) throw new ModelUnavailable("", "the server is shutting down", "failed");
    const slot = this.slots.get(this.idOf(requested))!;
    if (opts.keepAliveMs !== undefined) slot.keepAliveMs = opts.keepAliveMs;
    slot.leases++;
    this.disarm(slot);
    try {
      const model = slot.model ?? await this.load(slot);
      slot.lastUsedMs = this.now();
      let released = false;
      return {
        id: slot.entry.id,
        model,
        release: () => {
          if (released) return;
          released = true;
          slot.leases--;
          slot.lastUsedMs = this.now();
          this.arm(slot);
        },
      };
    } catch (err) {
      slot.leases--;
      throw err;
    }
  }

  /** Unloads a model as soon as it is idle (Ollama's keep_alive 0 with no prompt). */
  async unload(requested: string): Promise<void> {
    const slot = this.slots.get(this.idOf(requested))!;
    slot.keepAliveMs = 0;
    if (slot.loading) await slot.loading.catch(() => {});
    while (slot.model && this.busy(slot)) await this.sleep();
    if (slot.model && slot.leases === 0) await this.evict(slot, "unloaded");
  }

  list(): ModelListing[] {
    return [...this.slots.values()].map((s) => ({
      id: s.entry.id,
      aliases: s.entry.aliases,
      source: s.entry.source,
      sizeBytes: s.entry.sizeBytes,
      status: s.status,
      pinned: this.pinned(s),
      kind: s.model?.kind ?? null,
      deviceBytes: s.model?.deviceBytes ?? 0,
      hostBytes: s.model?.hostBytes ?? 0,
      expiresAtMs: s.model && !this.pinned(s) && Number.isFinite(s.keepAliveMs)
        ? s.expiresAtMs ?? this.now() + s.keepAliveMs
        : null,
      lastError: s.lastError,
    }));
  }

  /** The loaded models (for /metrics, shutdown). */
  loaded(): { id: string; model: LoadedModel }[] {
    return [...this.slots.values()].filter((s) => s.model).map((s) => ({
      id: s.entry.id,
      model: s.model!,
    }));
  }

  /** Requests in flight across every model (graceful shutdown waits for none). */
  inFlight(): number {
    let n = 0;
    for (const s of this.slots.values()) n += s.leases + (s.model?.inFlight() ?? 0);
    return n;
  }

  /** Closes every model (shutdown). */
  async close(): Promise<void> {
    this.closed = true;
    for (const slot of this.slots.values()) {
      this.disarm(slot);
      if (slot.loading) await slot.loading.catch(() => {});
      if (slot.model) await this.evict(slot, "closed");
    }
  }

  private pinned(slot: Slot): boolean {
    return this.options.pinned.some((p) => this.names.get(p) === slot.entry.id);
  }

  private busy(slot: Slot): boolean {
    return slot.leases > 0 || (slot.model?.inFlight() ?? 0) > 0;
  }

  private load(slot: Slot): Promise<LoadedModel> {
    if (slot.loading) return slot.loading;
    slot.status = "loading";
    slot.loading = (async () => {
      try {
        await this.makeRoom(slot);
        const started = this.now();
        const model = await this.options.open(slot.entry);
        if (this.closed) {
          await model.close();
          throw new ModelUnavailable(slot.entry.id, "the server is shutting down", "failed");
        }
        slot.model = model;
        slot.status = "ready";
        slot.lastError = null;
        this.counts.loads++;
        this.options.log?.(
          `sluice: loaded model '${slot.entry.id}' in ${Math.round(this.now() - started)} ms`,
        );
        return model;
      } catch (err) {
        slot.status = "unloaded";
        const message = err instanceof Error ? err.message : String(err);
        slot.lastError = message;
        if (err instanceof ModelUnavailable) throw err;
        throw new ModelUnavailable(slot.entry.id, message, "failed");
      } finally {
        slot.loading = null;
      }
    })();
    return slot.loading;
  }

  /** Unloads least recently used idle models until `slot` fits; waits while the rest are busy. */
  private async makeRoom(slot: Slot): Promise<void> {
    const need = slot.entry.sizeBytes + this.options.extraDeviceBytes;
    const budget = this.options.deviceBudgetBytes;
    if (budget !== null && need > budget) {
      throw new ModelUnavailable(
        slot.entry.id,
        `model '${slot.entry.id}' needs about ${mib(need)} MiB of device memory, over the ` +
          `budget of ${mib(budget)} MiB`,
        "no_room",
      );
    }
    for (;;) {
      const others = [...this.slots.values()].filter((s) => s !== slot && s.status !== "unloaded");
      const used = others.reduce(
        (sum, s) =>
          sum + (s.model?.deviceBytes ?? s.entry.sizeBytes + this.options.extraDeviceBytes),
        0,
      );
      const fits = others.length < this.options.maxLoaded &&
        (budget === null || used + need <= budget);
      if (fits) return;
      const candidates = others.filter((s) => s.status === "ready" && !this.pinned(s));
      if (candidates.length === 0) {
        throw new ModelUnavailable(
          slot.entry.id,
          `cannot load model '${slot.entry.id}': the models holding the room are pinned or ` +
            `loading (--max-loaded ${this.options.maxLoaded}${
              budget === null ? "" : `, budget ${mib(budget)} MiB`
            })`,
          "no_room",
        );
      }
      const victim = modelVictim(
        candidates.map((s) => ({ id: s.entry.id, lastUsedMs: s.lastUsedMs, busy: this.busy(s) })),
      );
      if (victim === null) {
        await this.sleep(); // every candidate is busy: new work queues until one is idle
        continue;
      }
      await this.evict(this.slots.get(victim)!, "evicted");
    }
  }

  private async evict(slot: Slot, why: "evicted" | "expired" | "unloaded" | "closed") {
    const model = slot.model!;
    this.disarm(slot);
    slot.model = null;
    slot.status = "unloaded";
    slot.expiresAtMs = null;
    this.counts.unloads++;
    if (why === "evicted") this.counts.evictions++;
    if (why !== "closed") this.options.log?.(`sluice: model '${slot.entry.id}' ${why}`);
    await model.close();
  }

  /** Starts the keep-alive clock of an idle model. */
  private arm(slot: Slot) {
    this.disarm(slot);
    if (!slot.model || this.pinned(slot) || this.closed) return;
    if (!Number.isFinite(slot.keepAliveMs)) return;
    slot.expiresAtMs = this.now() + slot.keepAliveMs;
    const check = () => {
      slot.timer = undefined;
      if (!slot.model || this.closed) return;
      if (this.busy(slot)) {
        // Still streaming: the keep-alive counts from its end, looked for every pollMs.
        slot.expiresAtMs = this.now() + slot.keepAliveMs;
        slot.timer = setTimeout(check, Math.min(this.pollMs, Math.max(1, slot.keepAliveMs)));
        return;
      }
      if (slot.expiresAtMs !== null && this.now() + 0.5 < slot.expiresAtMs) {
        slot.timer = setTimeout(check, slot.expiresAtMs - this.now());
        return;
      }
      void this.evict(slot, "expired");
    };
    slot.timer = setTimeout(check, slot.keepAliveMs);
  }

  private disarm(slot: Slot) {
    clearTimeout(slot.timer);
    slot.timer = undefined;
    slot.expiresAtMs = null;
  }

  private sleep() {
    return new Promise((r) => setTimeout(r, this.pollMs));
  }
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(0);
