// runtime/validation.ts's checks of the sampling controls: each value out of range is refused
// with InvalidRequest naming the body parameter; values at the edges of their ranges are taken.

import type { SamplingParams } from "../../engine/engine.ts";
import { InvalidRequest, validate } from "../../runtime/validation.ts";
import { assertEquals, assertThrows } from "../helpers/testing.ts";

const info = { vocabSize: 50, maxTopLogprobs: 5 };
const options = { maxTokensLimit: 100, eosIds: [] };
const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };

function submit(extra: Partial<SamplingParams>) {
  return validate({ ids: [1, 2], sampling: { ...greedy, ...extra } }, info, 64, options);
}

function refused(extra: Partial<SamplingParams>): string | null {
  try {
    submit(extra);
    return null;
  } catch (err) {
    if (!(err instanceof InvalidRequest)) throw err;
    return err.param;
  }
}

Deno.test("sampling controls in range are taken, as given", () => {
  const edges: Partial<SamplingParams> = {
    frequencyPenalty: -2,
    presencePenalty: 2,
    repetitionPenalty: 10,
    minP: 1,
    logitBias: [[0, -100], [49, 100]],
  };
  assertEquals(submit(edges).sampling, { ...greedy, ...edges });
  assertEquals(refused({ minP: 0, repetitionPenalty: 0.01, logitBias: [] }), null);
  assertEquals(
    refused({ logitBias: Array.from({ length: 1024 }, (_, i): [number, number] => [i % 50, 0]) }),
    "logit_bias", // ids repeat past 50
  );
});

Deno.test("sampling controls out of range are refused, naming the body parameter", () => {
  const cases: [Partial<SamplingParams>, string][] = [
    [{ frequencyPenalty: 2.01 }, "frequency_penalty"],
    [{ frequencyPenalty: NaN }, "frequency_penalty"],
    [{ presencePenalty: -2.5 }, "presence_penalty"],
    [{ repetitionPenalty: 0 }, "repetition_penalty"],
    [{ repetitionPenalty: 10.5 }, "repetition_penalty"],
    [{ repetitionPenalty: Infinity }, "repetition_penalty"],
    [{ minP: -0.1 }, "min_p"],
    [{ minP: 1.5 }, "min_p"],
    [{ logitBias: [[50, 1]] }, "logit_bias"],
    [{ logitBias: [[-1, 1]] }, "logit_bias"],
    [{ logitBias: [[1.5, 1]] }, "logit_bias"],
    [{ logitBias: [[3, 100.5]] }, "logit_bias"],
    [{ logitBias: [[3, NaN]] }, "logit_bias"],
    [{ logitBias: [[3, 1], [3, 2]] }, "logit_bias"],
  ];
  for (const [extra, param] of cases) assertEquals(refused(extra), param, JSON.stringify(extra));
  const big = { vocabSize: 5000, maxTopLogprobs: 5 };
  const many = Array.from({ length: 1025 }, (_, i): [number, number] => [i, 1]);
  assertThrows(
    () => validate({ ids: [1], sampling: { ...greedy, logitBias: many } }, big, 64, options),
    /limit is 1024/,
  );
});

Deno.test("an embedding request (pooling) may fill the context, and generates nothing", () => {
  const pooled = (ids: number[], maxTokens?: number) =>
    validate({ ids, sampling: greedy, pooling: "last", maxTokens }, info, 64, options);
  const full = Array.from({ length: 64 }, (_, i) => i % 50);
  assertEquals([pooled(full).maxTokens, pooled(full).pooling], [0, "last"]);
  assertEquals(pooled([1], 0).maxTokens, 0);
  assertThrows(() => pooled([...full, 1]), InvalidRequest);
  assertThrows(() => pooled([1], 1), InvalidRequest);
  // A generating prompt must leave room for a token.
  assertThrows(() => validate({ ids: full, sampling: greedy }, info, 64, options), InvalidRequest);
});
