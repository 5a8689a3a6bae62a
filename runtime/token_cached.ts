// eLLM's token-wise caching, carried out (the rule is token_cache.ts; flag `--token-cache`). Each
// step, before admission, the rule says how many of each running request's oldest positions stay
// uncached; this file makes its block tables say so:
//
//   uncached  its first k blocks on every layer are the same k scratch blocks (BlockPool.alias:
//             each layer writes its KV there over the layer before's, in the step that reads it);
//             each step it decodes, rows for those positions ride in the step before its decode
//             row, so every layer rebuilds its keys and values there just before reading them;
//   cached    ordinary blocks again; they are filled by the recompute rows of its next step.
//
// Nothing else may read a token-cached request's KV as if it were whole: its prefix blocks leave
// the prefix cache, its host copies are released, write-through skips it, and before it is
// preempted settle() turns its uncached positions into dropped ones (a partial resume refills them).

import type { BlockPool } from "./kv/block_pool.ts";
import type { HostTier } from "./kv/host_tier.ts";
import type { Placement } from "./placement.ts";
import type { PrefixCache } from "./prefix_cache.ts";
import type { Request } from "./request/request.ts";
import { chooseUncached, type TokenCacheDecision } from "./token_cache.ts";

export interface TokenCachedParts {
  pool: BlockPool;
  maxRows: number;
  /** Predicted ms of a step of `rows` rows; null: no cost model. */
  stepMs: (rows: number) => number | null;
  /** eLLM's h (token_cache.ts: its context terms); 0: none. */
  hidden: number;
  /** Positions a queued request needs to be admitted (the policy's admission tokens). */
  admissionTokens: (req: Request) => number;
  /** The step being built must rewrite `req`'s block tables. */
  retable: (req: Request) => void;
  host: HostTier | null;
  placement: Placement | null;
  prefix: PrefixCache | null;
}

export class TokenCached {
  /** Times a request left more of its KV uncached, and times it took some back. */
  uncachings = 0;
  recachings = 0;
  /** Recompute rows of uncached positions, over all steps. */
  rows = 0;
  /** The rule's last choice (null before the first step or when it cannot apply). */
  last: TokenCacheDecision | null = null;
  /** Per request: its oldest positions held in shared scratch blocks. */
  private readonly aliased = new Map<Request, number>();
  /** Per request: its oldest positions its next decode step computes again (≥ aliased). */
  private readonly stale = new Map<Request, number>();

  constructor(private readonly parts: TokenCachedParts) {
    // Uncached positions alias scratch blocks across the layers of one arena: elsewhere the flag
    // could do nothing, so it is refused.
    const { pool } = parts;
    if (pool.numArenas !== 1 || pool.numLayers < 2) {
      throw new RangeError(
        `--token-cache: needs every layer's KV in one arena and at least 2 layers (this engine: ` +
          `${pool.numArenas} arenas, ${pool.numLayers} layers)`,
      );
    }
  }

  /** Oldest positions of `req` whose KV is uncached now. */
  uncached(req: Request): number {
    return this.aliased.get(req) ?? 0;
  }

  /** Positions to compute again in `req`'s decode step, before its row. */
  recompute(req: Request): number {
    return this.stale.get(req) ?? 0;
  }

  /**
   * Whether one more request may be admitted beside `running` ones: the rule's batch size b bounds
   * admission (eLLM eq. 1, b ≤ B; §5: b is "propagated to the scheduler to govern concurrent
   * sequence execution limits"). No decision (nothing ran at the last step): no bound.
   */
  admits(running: number): boolean {
    return this.last === null || running < this.last.batch;
  }

  /** True when no running request has positions to compute again: every table holds its KV, so
   * decode steps may run as a group (decode_group.ts) with nothing recomputed in between. */
  get whole(): boolean {
    return this.stale.size === 0;
  }

  /** True while `req`'s leading blocks do not hold its KV between steps. */
  holds(req: Request): boolean {
    return this.stale.has(req);
  }

  /** `req`'s decode step carried its recompute rows: only the scratch needs them again. */
  recomputed(req: Request): void {
    const n = this.stale.get(req) ?? 0;
    this.rows += n;
    const a = this.uncached(req);
    if (a > 0) this.stale.set(req, a);
    else this.stale.delete(req);
  }

  /** The rule's choice for this step, carried out; called before admission. */
  adjust(running: readonly Request[], waiting: readonly Request[], freeSlots: number): void {
    const { pool, maxRows } = this.parts;
    const L = pool.numLayers, B = pool.blockSize;
    this.last = null;
    if (running.length === 0) return;
    const candidates = running.map((req) => {
      const eligible = req.state === "decoding" && !req.refill &&
        !this.parts.placement?.offloads(req);
      // Only positions whose ids are back on the host, and never its newest block.
      const known = Math.min(req.promptLength + req.generated.length, req.computed);
      const most = Math.floor(Math.min(known - B, maxRows - 1) / B) * B;
      return { tokens: req.computed + 1, maxUncached: eligible ? Math.max(0, most) : 0 };
    });
    const queue: Request[] = [];
    for (const req of waiting) {
      if (queue.length >= freeSlots || !req.resumable) break;
      queue.push(req);
    }
    const slos = [...running, ...queue].flatMap((r) => r.spec.slo.tbtMs ?? []);
    const budget = running.reduce((n, r) => n + this.held(r), 0) + pool.availableIn(0);
    const decision = chooseUncached({
      running: candidates,
      waiting: queue.map((r) => this.parts.admissionTokens(r)),
      budget,
      numLayers: L,
      blockSize: B,
      maxRows,
      stepMs: this.parts.stepMs,
      hidden: this.parts.hidden,
      outputTokens: Math.min(...running.map((r) => r.spec.maxTokens)),
      sloMs: slos.length > 0 ? Math.min(...slos) : null,
    });
    this.last = decision;
    running.forEach((req, i) => {
      if (i >= decision.batch) return; // preempted: beyond()
      if (decision.uncached[i] !== this.uncached(req)) this.set(req, decision.uncached[i]);
    });
  }

  /**
   * The running requests the rule's batch leaves out, newest first: eq. 1's b fell below the
   * running batch (none of the batches that keep them all met memory and the SLO).
   */
  beyond(running: readonly Request[]): Request[] {
    const b = this.last?.batch ?? running.length;
    return running.slice(b).reverse();
  }

  /**
   * Before `req` is preempted: frees its scratch (and blocks it took back but has not refilled);
   * its first entries read VACANT. Returns how many, per layer (0: it was whole).
   */
  settle(req: Request): number {
    const span = Math.ceil(this.recompute(req) / this.parts.pool.blockSize);
    this.forget(req);
    if (span > 0) this.parts.pool.dropLeading(req.id, span);
    return span;
  }

  forget(req: Request): void {
    this.aliased.delete(req);
    this.stale.delete(req);
  }

  /** Device blocks `req` holds, its scratch counted once. */
  private held(req: Request): number {
    const { pool } = this.parts;
    return pool.heldBy(req.id) - (pool.numLayers - 1) * (this.uncached(req) / pool.blockSize);
  }

  /** Leaves `req`'s first `tokens` positions uncached (a multiple of the block size). */
  private set(req: Request, tokens: number): void {
    const { pool, host, prefix } = this.parts;
    const B = pool.blockSize;
    const k = tokens / B;
    const span = Math.max(Math.ceil(this.recompute(req) / B), k);
    // What it gets: k scratch blocks, and ordinary ones for the rest of the span on every layer.
    const need = k + pool.numLayers * (span - k);
    if (need > pool.availableIn(0) + this.freedByDropping(req, span)) return;
    if (k > this.uncached(req)) this.uncachings++;
    else this.recachings++;
    host?.release(req); // its host copy would no longer match what its blocks hold
    prefix?.stop(req); // its leading blocks are no longer its prompt's KV
    pool.dropLeading(req.id, span);
    if (k > 0 && !pool.alias(req.id, k)) throw new Error("alias refused blocks it was told fit");
    if (!pool.growAll(req.id, req.computed)) throw new Error("refill refused blocks that fit");
    if (k > 0) this.aliased.set(req, tokens);
    else this.aliased.delete(req);
    this.stale.set(req, span * B);
    this.parts.retable(req);
  }

  /** Blocks dropping `req`'s first `span` entries would free (shared ones stay). */
  private freedByDropping(req: Request, span: number): number {
    const { pool } = this.parts;
    const scratch = this.uncached(req) / pool.blockSize;
    const blocks = new Set<number>(pool.table(req.id, 0).slice(0, scratch));
    for (let layer = 0; layer < pool.numLayers; layer++) {
      pool.table(req.id, layer).slice(scratch, span).forEach((b) => {
        if (b >= 0 && pool.holders(layer, b) === 1) blocks.add(b);
      });
    }
    return blocks.size;
  }
}
