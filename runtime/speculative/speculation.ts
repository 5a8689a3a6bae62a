// Speculative decoding, the scheduler's half (`--speculative`). A request that speculates has its
// decode row followed by k draft rows of the same sequence, positions pos+1..pos+k, each taking a
// drafted token and each sampled: the target's token at every position in one step. Delivery
// (verify.ts) keeps the target's tokens while they agree with the drafts, and one more.
//
// Drafts depend on the request's newest token, so a request drafts only once its last samples are
// back: it is not pipelined while it speculates. How many it drafts is what pays on this engine at
// the acceptance its drafts have had (draft_length.ts); where none pays, it decodes as usual for a
// while (pipelined, in decode groups) and weighs drafting again later.
//
// Who does not speculate: constrained requests (the mask of a draft's successor needs the grammar
// advanced past a token not yet accepted), requests with repetition/frequency/presence penalties
// (the GPU counts every sampled id of a slot, rejected drafts too, and a draft row's penalties would
// miss the drafts before it), embedding requests, and requests that opt out.

import { usesPenalties } from "../../engine/gpu/kernels/logit_controls.ts";
import type { Request } from "../request/request.ts";
import { NGRAM_WINDOW, ngramDrafts } from "./ngram.ts";
import {
  acceptance,
  type AcceptanceRecord,
  draftLength,
  fade,
  newRecord,
  record,
  type StepCosts,
} from "./draft_length.ts";

/** `--speculative`: off, or prompt lookup (ngram.ts). */
export type SpeculativeMode = "off" | "ngram";

/** `--num-speculative-tokens` by default. */
export const DEFAULT_SPECULATIVE_TOKENS = 4;

/** Proposes up to `k` tokens to follow `req`'s prompt and generated ids (all of them back). */
export interface Drafter {
  propose(req: Request, k: number): number[];
}

/** Prompt lookup over the request's own tokens. */
export const NGRAM_DRAFTER: Drafter = {
  propose(req, k) {
    const end = req.prefillTarget;
    return ngramDrafts(req.tokens(Math.max(0, end - NGRAM_WINDOW), end), k);
  },
};

/**
 * Samples a request decodes as usual before it weighs drafting again (each weighing waits for its
 * tokens in flight): after its drafts stopped paying (its record fades meanwhile, so it tries
 * again), and after the drafter found nothing; twice as many each time it happens again without
 * an accepted draft in between, up to MAX_BACKOFF_SAMPLES.
 */
const BACKOFF_SAMPLES = 16;
const NOTHING_FOUND_SAMPLES = 4;
const MAX_BACKOFF_SAMPLES = 128;

/** vLLM's spec_decode counters. */
export interface SpeculationStats {
  /** Verifications run (a request's drafts checked in one step). */
  drafts: number;
  draftTokens: number;
  acceptedTokens: number;
  /** Per draft position (0..k-1): drafts accepted there. */
  acceptedPerPos: number[];
}

interface Drafting {
  /** What its verifications accepted (draft_length.ts). */
  record: AcceptanceRecord;
  /** The pause after its drafts next stop paying, and after the drafter next finds nothing. */
  backoff: number;
  idle: number;
  /** It drafts again once it has issued this many samples. */
  resumeAt: number;
  /** Its drafts are in a step not yet delivered: it waits for them. */
  verifying: boolean;
}

export class Speculation {
  readonly stats: SpeculationStats;
  private readonly state = new WeakMap<Request, Drafting>();

  /** `k` 0: nobody speculates. `costs`: what steps cost on this engine (draft_length.ts). */
  constructor(
    readonly k: number,
    private readonly drafter: Drafter = NGRAM_DRAFTER,
    private readonly costs: StepCosts = { model: () => undefined, groupSteps: 1 },
  ) {
    this.stats = { drafts: 0, draftTokens: 0, acceptedTokens: 0, acceptedPerPos: Array(k).fill(0) };
  }

  /** Whether `req` may speculate at all. */
  eligible(req: Request): boolean {
    return this.k > 0 && req.spec.speculate !== false && req.grammar === null &&
      req.pooled === null && !usesPenalties(req.spec.sampling);
  }

  /** Whether `req` would draft in its next step: then it waits for its samples in flight. */
  wantsToDraft(req: Request): boolean {
    if (!this.eligible(req)) return false;
    const s = this.of(req);
    return s.verifying || req.issued >= s.resumeAt;
  }

  /**
   * `req` waits for its samples in flight before its next row, to draft from its newest token.
   * Where its acceptance so far says no draft length would pay (at the best, a step of its row
   * alone), it does not wait for nothing: drafting pauses now.
   */
  waits(req: Request): boolean {
    if (!this.wantsToDraft(req)) return false;
    const s = this.of(req);
    if (!s.verifying && this.draftsFor(s, this.k, 1) === 0) {
      this.pause(req, s);
      return false;
    }
    return req.inflight > 0;
  }

  /**
   * Whether `req`'s decode row names its token rather than taking the sampler's: every token is
   * back, and the sampler's id of its slot may be a draft row's (several rows sampled it).
   */
  namesToken(req: Request): boolean {
    return req.inflight === 0 && this.eligible(req);
  }

  /**
   * Drafts to follow `req`'s decode row, just sampled (with every sample before it back): as many
   * as pay on this engine at its acceptance so far (draft_length.ts), at most `space.room` and no
   * more than max_tokens leaves room for, in blocks `grow` finds free for them; [] when it does
   * not draft now. The drafts it returns are counted as drafted.
   */
  propose(
    req: Request,
    space: { room: number; rows: number },
    grow: (drafts: number) => boolean,
  ): number[] {
    if (req.inflight !== 1 || !this.wantsToDraft(req)) return [];
    const s = this.of(req);
    const most = Math.min(this.k, space.room, req.spec.maxTokens - req.issued);
    if (most <= 0) return [];
    const k = this.draftsFor(s, most, space.rows);
    if (k === 0) {
      this.pause(req, s);
      return [];
    }
    const drafts = this.drafter.propose(req, k).slice(0, k);
    if (drafts.length === 0) {
      s.resumeAt = req.issued + s.idle;
      s.idle = Math.min(2 * s.idle, MAX_BACKOFF_SAMPLES);
    }
    if (drafts.length === 0 || !grow(drafts.length)) return [];
    s.verifying = true;
    this.stats.drafts++;
    this.stats.draftTokens += drafts.length;
    return drafts;
  }

  /** `req`'s verification came back: `accepted` of its `drafted` drafts were kept. */
  verified(req: Request, accepted: number, drafted: number): void {
    const s = this.of(req);
    s.verifying = false;
    this.stats.acceptedTokens += accepted;
    for (let i = 0; i < accepted; i++) this.stats.acceptedPerPos[i]++;
    record(s.record, accepted, drafted);
    if (accepted > 0) [s.backoff, s.idle] = [BACKOFF_SAMPLES, NOTHING_FOUND_SAMPLES];
  }

  /**
   * Drafts that pay at `s`'s acceptance in a step of `rows` rows (draft_length.ts), at most `most`;
   * knowing little of its drafts yet (none, or little after pauses), it tries as many as it may.
   */
  private draftsFor(s: Drafting, most: number, rows: number): number {
    const known = s.record.accepted + s.record.rejected >= 0.5;
    return known ? draftLength(acceptance(s.record), most, rows, this.costs) : most;
  }

  /** Drafting does not pay now: `req` decodes as usual for a while, then weighs it again. */
  private pause(req: Request, s: Drafting): void {
    s.resumeAt = req.issued + s.backoff;
    s.backoff = Math.min(2 * s.backoff, MAX_BACKOFF_SAMPLES);
    fade(s.record);
  }

  private of(req: Request): Drafting {
    let s = this.state.get(req);
    if (!s) {
      s = {
        record: newRecord(),
        backoff: BACKOFF_SAMPLES,
        idle: NOTHING_FOUND_SAMPLES,
        resumeAt: 0,
        verifying: false,
      };
      this.state.set(req, s);
    }
    return s;
  }
}
