// The accept/reject rule of verification (runtime/speculative/verify.ts) leaves the output
// distribution unchanged: a statistical test on a tiny vocabulary. The target is a Markov chain
// over 3 tokens (the next token's law depends on the last one); a deterministic drafter proposes
// fixed tokens; each row's target token is drawn given the context that row reads (the drafts
// before it), as the engine's sampler draws it; verification delivers. The sequences of 3 tokens
// that come out must follow the chain's own law (chi-square over the 27 sequences), and a naive rule
// (accept d with probability p(d), else draw again from all of p) must fail the same test.

import { deliverRun, type SpeculatedRun } from "../../../runtime/speculative/verify.ts";
import type { Request } from "../../../runtime/request/request.ts";
import { stage, testRequest } from "../../helpers/requests.ts";
import { rng } from "../../helpers/random.ts";
import { assert } from "../../helpers/testing.ts";

/** P[a][b]: the chance that b follows a. */
const P = [
  [0.6, 0.3, 0.1],
  [0.2, 0.2, 0.6],
  [0.5, 0.1, 0.4],
];
const V = 3, LENGTH = 3, K = 2, TRIALS = 20_000;
/** Chi-square's 0.999 quantile for 26 degrees of freedom. */
const CRITICAL = 54.05;

function draw(p: readonly number[], u: number): number {
  for (let x = 0; x < p.length; x++) if ((u -= p[x]) < 0) return x;
  return p.length - 1;
}

/**
 * One request's LENGTH tokens after token `start`, speculated with drafts `drafts` (cut to what
 * max_tokens leaves), each row's token drawn by `rowToken` given the token before that row and the
 * row's draft (null: a row whose draft is the last of the run).
 */
function generate(
  start: number,
  drafts: readonly number[],
  rowToken: (before: number, draft: number | null) => number,
): number[] {
  const req: Request = stage(testRequest(0, { ids: [start], maxTokens: LENGTH }), "decoding");
  while (!req.finish) {
    const pos = req.promptLength + req.generated.length - 1;
    const k = Math.min(K, LENGTH - req.generated.length - 1);
    const run: SpeculatedRun = { first: 0, pos, drafts: drafts.slice(0, k) };
    req.computeTo(pos + 1);
    const records = [];
    for (let j = 0; j <= k; j++) {
      req.issueSample();
      const before = j === 0 ? req.tokenAt(pos) : run.drafts[j - 1];
      records.push({ id: rowToken(before, j < k ? run.drafts[j] : null), logprob: 0, top: [] });
    }
    deliverRun(req, run, records, { verified: () => {} });
  }
  return [...req.generated];
}

/** Chi-square of the sequences `sample` makes against the chain's law, from token 0. */
function chiSquare(sample: () => number[]): number {
  const counts = new Map<string, number>();
  for (let t = 0; t < TRIALS; t++) {
    const key = sample().join(",");
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  let chi = 0;
  for (let s = 0; s < V ** LENGTH; s++) {
    const seq = [Math.floor(s / 9), Math.floor(s / 3) % 3, s % 3];
    let p = 1, before = 0;
    for (const x of seq) [p, before] = [p * P[before][x], x];
    const expected = TRIALS * p;
    chi += ((counts.get(seq.join(",")) ?? 0) - expected) ** 2 / expected;
  }
  return chi;
}

Deno.test("verification keeps the target's law: the sequences follow the chain, a naive rule does not", () => {
  const u = rng(12345);
  // The standard rule as the engine runs it: every row draws from the target; verification
  // accepts a draft where the draw equals it.
  const exact = chiSquare(() => generate(0, [0, 2], (before) => draw(P[before], u())));
  assert(exact < CRITICAL, `chi-square ${exact.toFixed(1)} >= ${CRITICAL}: the law changed`);
  // Naive: a row keeps its draft with probability p(d), else draws from all of p (d included).
  const naive = chiSquare(() =>
    generate(0, [0, 2], (before, draft) => {
      if (draft !== null && u() < P[before][draft]) return draft;
      return draw(P[before], u());
    })
  );
  assert(naive > CRITICAL, `chi-square ${naive.toFixed(1)}: the test cannot tell a wrong rule`);
});
