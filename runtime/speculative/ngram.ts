// Prompt lookup, the draft-free drafter (`--speculative ngram`): the request's own tokens predict
// its next ones. The last n tokens (n from 3 down to 1) are looked up earlier in prompt + output;
// at their latest earlier occurrence, the tokens that followed are the draft (a match close to the
// end repeats with its period: "a b a b" proposes "a b a b"). Code, quotes and
// edits of the prompt repeat long runs, where this proposes many tokens the model would say anyway;
// where nothing repeats it proposes nothing, and the request decodes as usual.

/** Longest suffix looked up, and how far back the lookup reads (bounds its cost per step). */
export const NGRAM_MAX = 3;
export const NGRAM_WINDOW = 4096;

/**
 * Up to `k` tokens predicted to follow `tokens`: those after the latest earlier occurrence of its
 * last n tokens, for the largest n in maxN..1 that occurs; [] when none does.
 */
export function ngramDrafts(tokens: readonly number[], k: number, maxN = NGRAM_MAX): number[] {
  const end = tokens.length;
  if (k <= 0 || end < 2) return [];
  const start = Math.max(0, end - NGRAM_WINDOW);
  for (let n = Math.min(maxN, end - 1); n >= 1; n--) {
    // A match at i..i+n-1, other than the suffix itself, with at least one token after it.
    for (let i = end - n - 1; i >= start; i--) {
      if (matchesSuffix(tokens, i, n)) return continuation(tokens, i + n, k);
    }
  }
  return [];
}

/**
 * k tokens from `from` on; past the end, the sequence is taken to repeat with the period the match
 * found (what follows the end is what followed the match), so a run proposes k of itself.
 */
function continuation(tokens: readonly number[], from: number, k: number): number[] {
  const out: number[] = [];
  for (let j = 0; j < k; j++) {
    const at = from + j;
    out.push(at < tokens.length ? tokens[at] : out[at - tokens.length]);
  }
  return out;
}

function matchesSuffix(tokens: readonly number[], at: number, n: number): boolean {
  const suffix = tokens.length - n;
  for (let j = 0; j < n; j++) if (tokens[at + j] !== tokens[suffix + j]) return false;
  return true;
}
