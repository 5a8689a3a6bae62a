// What the grammar tests share: the tiny models' real tokenizer (byte-level BPE, 512 tokens), a
// runtime over the fake engine (whose logits width, 544, is padded past the vocabulary), and a
// count of xgrammar's matchers made and disposed.

import { openModelDir } from "../../../engine/formats/open_model.ts";
import { writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import { Tokenizer } from "../../../engine/text/tokenizer.ts";
import { loadXGrammar } from "../../../runtime/grammar/xgrammar.ts";
import { Runtime, type RuntimeOptions } from "../../../runtime/service.ts";
import { FakeEngine, type FakeEngineShape } from "../../../sim/fake_engine.ts";

export const LOGITS = 544;

let tokenizer: Promise<Tokenizer> | null = null;

/** The tiny models' tokenizer, built once per test file. */
export function tinyTokenizer(): Promise<Tokenizer> {
  tokenizer ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "sluice-grammar-" });
    await writeTinyModel(dir, {
      hiddenSize: 16,
      intermediateSize: 32,
      numLayers: 1,
      numHeads: 2,
      numKvHeads: 1,
      tied: true,
      dtype: "F16",
      seed: 3,
    });
    const t = new Tokenizer(await openModelDir(dir));
    await Deno.remove(dir, { recursive: true });
    return t;
  })();
  return tokenizer;
}

export async function grammarRuntime(
  shape: FakeEngineShape = {},
  options: Partial<RuntimeOptions> = {},
): Promise<{ runtime: Runtime; engine: FakeEngine; tokenizer: Tokenizer }> {
  const t = await tinyTokenizer();
  const engine = new FakeEngine({
    vocabSize: LOGITS,
    blocksPerArena: [512],
    maxBlocksPerSeq: 256,
    ...shape,
  });
  const runtime = new Runtime(engine, {
    policy: "fcfs",
    maxQueue: 64,
    maxTokensLimit: 1024,
    eosIds: t.eosTokenIds,
    vocabulary: () => t.vocabulary(),
    ...options,
  });
  return { runtime, engine, tokenizer: t };
}

let counting: Promise<{ made: number; disposed: number }> | null = null;

/** xgrammar's matchers made and disposed since the first call (the counts only grow). */
export function matcherCounts(): Promise<{ made: number; disposed: number }> {
  counting ??= countMatchers();
  return counting;
}

async function countMatchers(): Promise<{ made: number; disposed: number }> {
  const { GrammarMatcher } = await loadXGrammar();
  const counts = { made: 0, disposed: 0 };
  const create = GrammarMatcher.createGrammarMatcher;
  GrammarMatcher.createGrammarMatcher = async (...args) => {
    const m = await create.apply(GrammarMatcher, args);
    counts.made++;
    const dispose = m.dispose.bind(m);
    m.dispose = () => {
      counts.disposed++;
      dispose();
    };
    return m;
  };
  return counts;
}
