// Prompt lookup (runtime/speculative/ngram.ts): the longest suffix of up to 3 tokens found earlier
// proposes what followed its latest occurrence.

import { ngramDrafts } from "../../../runtime/speculative/ngram.ts";
import { assertEquals } from "../../helpers/testing.ts";

Deno.test("the latest earlier occurrence of the longest matching suffix proposes what followed it", () => {
  // Suffix [1, 2, 3] occurs at 0 (followed by 9, 8, 7) and at 6 (followed by 5, 1, 2).
  const tokens = [1, 2, 3, 9, 8, 7, 1, 2, 3, 5, 1, 2, 3];
  assertEquals(ngramDrafts(tokens, 2), [5, 1]);
  assertEquals(ngramDrafts(tokens, 4), [5, 1, 2, 3], "the run may reach into the suffix itself");
  // Past the end, with the match's period (4): what followed the match follows again.
  assertEquals(ngramDrafts(tokens, 6), [5, 1, 2, 3, 5, 1]);
  // No 3- or 2-gram match: the last token alone, at its latest earlier place.
  assertEquals(ngramDrafts([4, 6, 1, 4, 7, 2, 4], 3), [7, 2, 4]);
  // A 3-gram match wins over a later 1-gram match.
  assertEquals(ngramDrafts([5, 6, 7, 11, 0, 7, 12, 5, 6, 7], 1), [11]);
});

Deno.test("nothing is proposed where nothing repeats, for k 0, or for too short a sequence", () => {
  assertEquals(ngramDrafts([1, 2, 3, 4, 5], 4), []);
  assertEquals(ngramDrafts([1, 2, 1, 2], 0), []);
  assertEquals(ngramDrafts([7], 4), []);
  assertEquals(ngramDrafts([], 4), []);
  // A run of one token, or a cycle, proposes more of itself.
  assertEquals(ngramDrafts([3, 3, 3, 3], 4), [3, 3, 3, 3]);
  assertEquals(ngramDrafts([8, 1, 2, 1, 2], 5), [1, 2, 1, 2, 1]);
});
