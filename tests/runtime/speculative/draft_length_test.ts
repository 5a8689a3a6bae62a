// How many drafts pay (runtime/speculative/draft_length.ts): the acceptance estimate from a
// request's verifications, the expected tokens of k drafts, and the draft length that brings the
// most tokens per cost on an engine whose rows are cheap (a GPU) or dear (a CPU rasteriser).

import {
  acceptance,
  draftLength,
  expectedTokens,
  fade,
  newRecord,
  record,
} from "../../../runtime/speculative/draft_length.ts";
import { costModelWithLayer } from "../../helpers/cost_models.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";

const assertAlmostEquals = (a: number, b: number, tolerance: number) =>
  assert(Math.abs(a - b) <= tolerance, `${a} is not ${b}`);

Deno.test("expected tokens of k drafts: a truncated geometric series", () => {
  assertAlmostEquals(expectedTokens(0.5, 4), 1 + 0.5 + 0.25 + 0.125 + 0.0625, 1e-12);
  assertEquals(expectedTokens(0, 4), 1);
  assertEquals(expectedTokens(1, 4), 5);
});

Deno.test("acceptance: accepted drafts over drafts judged, from a prior of a half each, fading", () => {
  const r = newRecord();
  assertEquals(acceptance(r), 0.5);
  record(r, 4, 4); // all accepted: nothing rejected
  assertAlmostEquals(acceptance(r), 4.5 / 5, 1e-12);
  record(r, 0, 4);
  assert(acceptance(r) < 4.5 / 5);
  const before = acceptance(r);
  fade(r);
  assert(Math.abs(acceptance(r) - 0.5) < Math.abs(before - 0.5), "fading moves it to the prior");
});

Deno.test("draft length: the most tokens per cost, none where no length pays", () => {
  // Rows nearly free (a GPU's weight-bound step), a round trip a quarter of a step: drafts pay at
  // even acceptance, and at high acceptance all k of them.
  const gpu = { model: () => costModelWithLayer(10, 0.01), groupSteps: 8 };
  assertEquals(draftLength(0.8, 4, 1, gpu), 4);
  assertEquals(draftLength(0.5, 4, 1, gpu) > 0, true);
  assertEquals(draftLength(0.02, 4, 1, gpu), 0, "a draft nobody accepts never pays");
  // Rows dear (each costs a third of a one-row step): only high acceptance pays, and fewer drafts.
  const cpu = { model: () => costModelWithLayer(10, 5), groupSteps: 8 };
  assertEquals(draftLength(0.3, 4, 1, cpu), 0);
  const k = draftLength(0.8, 4, 1, cpu);
  assert(k >= 1 && k <= 4, `${k}`);
  assert(draftLength(0.95, 4, 1, cpu) >= k);
  // In a batch, the others' rows wait for the verification too: it takes a higher acceptance.
  assert(draftLength(0.6, 4, 1, gpu) > 0);
  assertEquals(draftLength(0.6, 4, 8, gpu), 0);
  const none = { model: () => undefined, groupSteps: 8 };
  // Without a cost model, a draft row is taken at 5% of a step and the wait at 25%; `most` caps it.
  assertEquals(draftLength(0.8, 2, 1, none), 2);
  assertEquals(draftLength(0.8, 0, 1, none), 0);
});
