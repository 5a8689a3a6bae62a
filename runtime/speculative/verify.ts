// Verifying a speculated run (speculation.ts built it): the target's token came back for the
// decode row and for every draft row. The target's first token is the request's next token, as
// plain decoding would have sampled it; while the target's token at a position equals the draft
// the next row carried, that row read the right context, so its token is the request's next one
// too. The first disagreement ends the run: its token is kept (the target's own), the rows after
// it read a wrong token and are dropped; their KV never counts as computed (Request.settleDrafts),
// the request's next rows write over it, and blocks only they wrote go back to the pool once the
// step is delivered (KvSpace.settled).
//
// With sampling this is the standard accept/reject rule for a draft that is a point mass on d:
// accepting d with probability p(d), else drawing from p with d removed and renormalised, is the
// same as drawing x from p and accepting d when x = d, else keeping x. Each row's draw is the one
// plain decoding makes at that position (the sampler hashes its noise from seed and position), so
// a seeded request's tokens are the same with and without speculation, not only alike in law.
// Stop ids and max_tokens cut a run where plain decoding would stop: Request.accept ends the
// request, and nothing after it is taken.

import type { SampleRecord } from "../../engine/engine.ts";
import type { Request } from "../request/request.ts";

/** One request's draft rows in a step: its decode row's sample, `first`, and one per draft. */
export interface SpeculatedRun {
  /** Index of the decode row's sample; the drafts' samples follow it. */
  first: number;
  /** The decode row's position. */
  pos: number;
  drafts: number[];
}

/** Told how many of a run's drafts were accepted. */
export interface VerifiedListener {
  verified(req: Request, accepted: number, drafted: number): void;
}

/**
 * Gives one run's records to its request: the target's tokens up to and including the first that
 * disagrees with a draft, none after a finish. Returns the tokens delivered.
 */
export function deliverRun(
  req: Request,
  run: SpeculatedRun,
  records: readonly SampleRecord[],
  listener: VerifiedListener,
): number {
  const k = run.drafts.length;
  let taken = 0, accepted = 0;
  for (let j = 0; j <= k && !req.finish; j++) {
    const rec = records[run.first + j];
    req.accept(rec);
    taken++;
    if (j === k || rec.id !== run.drafts[j]) break;
    accepted++;
  }
  req.settleDrafts(run.pos, accepted, k + 1 - taken);
  listener.verified(req, accepted, k);
  return taken;
}
