// Turns the scheduler's decisions into the engine's StepPlan (engine/engine.ts): the block-table
// writes and sampling parameters of requests that took a slot or grew, then one step's token rows
// and sample rows, then the step's KV copies and prefetches. The scheduler says what runs; this
// file only encodes it.
//
// Table writes and sampling parameters wait for the next step that is built, whenever they were
// made (a request admitted between steps, by submit, rides in with the next step). Rows are the
// step's own, and so are the token masks of constrained requests' samples.

import type {
  DecodeGroup,
  PenaltySeed,
  SampleRecord,
  SamplingParams,
  StepPlan,
  TableWrite,
} from "../engine/engine.ts";
import { usesPenalties } from "../engine/gpu/kernels/logit_controls.ts";
import type { KvPrefetch } from "../engine/kv/kv_copies.ts";
import type { KvCopy } from "../engine/kv/kv_copies.ts";
import { NOT_RESIDENT } from "../engine/kv/pool_shape.ts";
import type { BlockPool } from "./kv/block_pool.ts";
import type { Landing } from "./kv/host_tier.ts";
import type { Request } from "./request/request.ts";
import { deliverRun, type SpeculatedRun, type VerifiedListener } from "./speculative/verify.ts";

/**
 * A built step: the plan for the engine and, per sample row, the request it belongs to (and per
 * hidden read, the embedding request it pools for).
 */
export interface BuiltStep {
  plan: StepPlan;
  owners: Request[];
  readers?: Request[];
  /** Host copies that are complete once this step is delivered. */
  landings: Landing[];
  /** Speculated runs (runtime/speculative/verify.ts), in sample order. */
  runs?: SpeculatedRun[];
}

export interface StepLimits {
  /** Most token rows per step. */
  maxRows: number;
  /** Most sample rows per step (the engine samples at most one per batch slot's worth). */
  maxSlots: number;
  /** Block-table entries per (slot, layer). */
  maxBlocksPerSeq: number;
}

export class StepBuilder {
  /** Host-side updates the next step must carry to the engine. */
  private tables: TableWrite[] = [];
  private sampling: { slot: number; params: SamplingParams }[] = [];
  private penaltySeeds: PenaltySeed[] = [];
  private rows: StepPlan["rows"] = [];
  private samples: StepPlan["samples"] = [];
  private masks: NonNullable<StepPlan["masks"]> = [];
  private owners: Request[] = [];
  private hiddenReads: NonNullable<StepPlan["hiddenReads"]> = [];
  private readers: Request[] = [];
  private runs: SpeculatedRun[] = [];
  private draftSamples = 0;
  /** Landings of a step that carried nothing: the next step takes them, so they land only after
   * every step before it is delivered (their copies may be in one still in flight). */
  private carriedLandings: Landing[] = [];
  /** Rows of positions computed before (their KV was lost meanwhile), over all steps. */
  recomputed = 0;
  /** Requests with rows in the step being built. */
  readonly inStep = new Set<Request>();

  constructor(private readonly pool: BlockPool, private readonly limits: StepLimits) {}

  /**
   * `req` took its slot: whole table rows for every layer, its sampling parameters and, when it
   * has penalties, the token counts they read. A request is seated with none of its samples in
   * flight, so `generated` holds every id it has sampled: counts seeded from it are exact however
   * often it was preempted, and the GPU counts on from there.
   */
  seated(req: Request): void {
    this.retable(req);
    this.sampling.push({ slot: req.slot, params: req.spec.sampling });
    if (usesPenalties(req.spec.sampling)) {
      this.penaltySeeds.push({
        slot: req.slot,
        prompt: req.spec.ids,
        generated: [...req.generated],
      });
    }
  }

  /** `req`'s tables changed anywhere (token_cached.ts): whole table rows for every layer. */
  retable(req: Request): void {
    for (let layer = 0; layer < this.pool.numLayers; layer++) {
      const row = new Array(this.limits.maxBlocksPerSeq).fill(NOT_RESIDENT);
      // VACANT and marked entries (offloaded, expired) hold no device block.
      this.pool.table(req.id, layer).forEach((b, i) => row[i] = b < 0 ? NOT_RESIDENT : b);
      this.tables.push({ slot: req.slot, layer, first: 0, blocks: row });
    }
  }

  /** `req`'s tables grew by `added` blocks per layer (the new tail of each table). */
  grew(req: Request, added: readonly number[][]): void {
    added.forEach((blocks, layer) => {
      if (blocks.length === 0) return;
      const first = this.pool.table(req.id, layer).length - blocks.length;
      this.tables.push({ slot: req.slot, layer, first, blocks });
    });
  }

  /** Starts a step: no rows yet. */
  begin(): void {
    this.rows = [];
    this.samples = [];
    this.masks = [];
    this.owners = [];
    this.hiddenReads = [];
    this.readers = [];
    this.runs = [];
    this.draftSamples = 0;
    this.inStep.clear();
  }

  /** Rows the step can still take. */
  get room(): number {
    return this.limits.maxRows - this.rows.length;
  }

  /**
   * Draft rows the step can still take (rows, and sample rows that none of the `running`
   * requests' own samples, one each at most, will need), and the rows it is expected to hold
   * without them (a decode row each), which is what their cost is weighed against.
   */
  draftSpace(running: number): { room: number; rows: number } {
    const samples = this.limits.maxSlots - running - this.draftSamples;
    return { room: Math.min(this.room, samples), rows: Math.max(1, running) };
  }

  /** A row of `req` at `pos` (`token` null: the id sampled last). True (and counted) when it is a
   * recompute. */
  row(req: Request, pos: number, token: number | null): boolean {
    this.rows.push({ slot: req.slot, pos, token });
    this.inStep.add(req);
    const again = req.rowAt(pos);
    if (again) this.recomputed++;
    return again;
  }

  /** Rows of `req` at positions from..to-1, each taking its known token. */
  known(req: Request, from: number, to: number): void {
    for (let pos = from; pos < to; pos++) this.row(req, pos, req.tokenAt(pos));
  }

  /**
   * Rows of the step if every one is a decode row taking the sampler's id and sampled (what a
   * decode group may hold), else 0.
   */
  get decodeRows(): number {
    const rows = this.rows;
    const plain = this.masks.length === 0 && this.samples.length === rows.length &&
      rows.every((r, i) => r.token === null && this.samples[i].row === i);
    return plain ? rows.length : 0;
  }

  /**
   * Makes the step's decode rows a group of up to `k` steps: each request's row runs until it has
   * taken `k` samples or its max_tokens, given blocks for those positions by `grow` (false: the
   * pool has no room, and the step stays one step), and the group ends when every row has. Its
   * extra samples are issued now, as the step's first one was. Null when some row could not
   * grow, or no row has a second sample to take.
   */
  group(k: number, grow: (req: Request, tokens: number) => boolean): DecodeGroup | null {
    const rows = this.rows, owners = this.owners;
    // The first sample is issued already: `issued` counts it.
    const budgets = owners.map((req) => Math.min(k, req.spec.maxTokens - req.issued + 1));
    // No step after every row has taken its budget.
    const steps = Math.max(...budgets);
    if (steps < 2) return null;
    if (!owners.every((req, i) => grow(req, rows[i].pos + budgets[i]))) return null;
    owners.forEach((req, i) => {
      const last = rows[i].pos + budgets[i] - 1;
      for (let n = 1; n < budgets[i]; n++) req.issueSample();
      req.rowAt(last);
      req.computeTo(last + 1);
    });
    return { steps, budgets, stopIds: owners.map((req) => [...req.spec.stopIds]) };
  }

  /**
   * `req`'s last `count` rows, at positions from..from+count-1, are prefill rows of an embedding
   * request: the ones its pooling reads are marked in the step.
   */
  pooled(req: Request, from: number, count: number): void {
    const read = req.pooled!.mark(from, from + count, this.rows.length - count);
    if (!read) return;
    this.hiddenReads.push(read);
    this.readers.push(req);
  }

  /** The last row is sampled, for `req` (under its grammar's mask if it has one). */
  sample(req: Request): void {
    const mask = req.grammar?.mask;
    if (mask) this.masks.push({ sample: this.samples.length, bits: mask });
    this.samples.push({ row: this.rows.length - 1 });
    this.owners.push(req);
    req.issueSample();
  }

  /**
   * `req`'s decode row, just sampled at `pos`, is followed by a row per draft at pos+1.., each
   * sampled: the target's token at every position, for delivery to check against the drafts. The
   * draft rows' KV counts as computed only once their tokens are accepted (Request.settleDrafts).
   */
  drafts(req: Request, pos: number, drafts: readonly number[]): void {
    this.runs.push({ first: this.samples.length - 1, pos, drafts: [...drafts] });
    this.draftSamples += drafts.length;
    drafts.forEach((token, i) => {
      this.rows.push({ slot: req.slot, pos: pos + 1 + i, token });
      this.samples.push({ row: this.rows.length - 1 });
      this.owners.push(req);
      req.issueSample();
    });
  }

  /**
   * The step, with the host tier's copies and the offloader's prefetches (their table entries
   * last: they override what a slot's new table said for those); null when it would carry
   * nothing (the table writes then wait for the next one).
   */
  finish(
    moves: { copies: KvCopy[]; landings: Landing[]; afterLayer?: KvCopy[] },
    offload: { prefetch: KvPrefetch[]; tables: TableWrite[] },
    group?: DecodeGroup,
  ): BuiltStep | null {
    const { copies, afterLayer = [] } = moves;
    const landings = [...this.carriedLandings, ...moves.landings];
    if (this.rows.length === 0 && copies.length === 0) {
      this.carriedLandings = landings;
      return null;
    }
    this.carriedLandings = [];
    const plan: StepPlan = {
      copies,
      prefetch: offload.prefetch,
      ...(afterLayer.length > 0 ? { copiesAfterLayer: afterLayer } : {}),
      tables: [...this.tables, ...offload.tables],
      sampling: this.sampling,
      ...(this.penaltySeeds.length > 0 ? { penaltySeeds: this.penaltySeeds } : {}),
      rows: this.rows,
      samples: this.samples,
      wantTopLogprobs: this.owners.some((r) => r.spec.topLogprobs > 0),
      ...(this.masks.length > 0 ? { masks: this.masks } : {}),
      ...(group ? { group } : {}),
      ...(this.hiddenReads.length > 0 ? { hiddenReads: this.hiddenReads } : {}),
    };
    this.tables = [];
    this.sampling = [];
    this.penaltySeeds = [];
    const readers = this.readers.length > 0 ? { readers: this.readers } : {};
    const runs = this.runs.length > 0 ? { runs: this.runs } : {};
    return { plan, owners: this.owners, landings, ...readers, ...runs };
  }
}

/**
 * Gives a step's sample records to the requests they belong to (`owners`, one per sample row),
 * none after a finish. A group's records come step by step; a request takes them in order until
 * it finishes, and what its row drew after that is dropped. A speculated run's records go to
 * verification (speculative/verify.ts), which tells `listener`. Returns the tokens delivered.
 */
export function deliverRecords(
  owners: readonly Request[],
  records: readonly SampleRecord[],
  runs: readonly SpeculatedRun[] = [],
  listener?: VerifiedListener,
) {
  const runAt = new Map(runs.map((run) => [run.first, run]));
  let delivered = 0;
  for (let i = 0; i < records.length; i++) {
    const req = owners[i % owners.length];
    const run = runAt.get(i);
    if (run) {
      delivered += deliverRun(req, run, records, listener!);
      i += run.drafts.length;
    } else if (!req.finish) {
      req.accept(records[i]);
      delivered++;
    }
  }
  return delivered;
}
