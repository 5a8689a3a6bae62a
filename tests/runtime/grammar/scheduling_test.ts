// A constrained request in the runtime: never pipelined, beside unconstrained ones that still are
// and whose tokens do not change; the same tokens after a preemption (recompute) at temperature 0;
// its matcher disposed when it is cancelled; bad grammars refused; compiled grammars cached.

import { Grammars } from "../../../runtime/grammar/grammars.ts";
import { type GrammarSpec, InvalidRequest, type Runtime } from "../../../runtime/service.ts";
import { toyGeneration } from "../../../sim/fake_engine.ts";
import { greedy } from "../../helpers/requests.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { grammarRuntime, LOGITS, matcherCounts, tinyTokenizer } from "./setup.ts";

const LETTERS = { type: "regex", pattern: "[a-z]{20,24}" } as const;

async function run(h: ReturnType<Runtime["submit"]>) {
  const ids: number[] = [];
  for await (const t of h.tokens) ids.push(t.id);
  return { ids, reason: (await h.done).reason };
}

Deno.test("grammar: beside a constrained request, an unconstrained one keeps its tokens and stays pipelined", async () => {
  const { runtime, engine, tokenizer } = await grammarRuntime();
  try {
    const prompt = tokenizer.encode("The river");
    const plain = runtime.submit({ ids: prompt, maxTokens: 40, sampling: greedy(7), stopIds: [] });
    const grammar = await runtime.compileGrammar(LETTERS);
    const constrained = runtime.submit({
      ids: prompt,
      maxTokens: 60,
      sampling: greedy(3),
      grammar,
    });
    const [a, b] = await Promise.all([run(plain), run(constrained)]);
    assertEquals(a.ids, toyGeneration(prompt, 40, 7, LOGITS));
    assertEquals(b.reason, "stop");
    assert(/^[a-z]{20,24}$/.test(tokenizer.decode(b.ids)));
    // Slots: the constrained request's samples are the masked ones.
    const steps = engine.samplesPerStep;
    const slotOf = (masked: boolean) => steps.flat().find((s) => s.masked === masked)!.slot;
    const has = (i: number, slot: number, masked: boolean) =>
      steps[i].some((s) => s.slot === slot && s.masked === masked);
    let plainPairs = 0;
    let maskedPairs = 0;
    for (let i = 1; i < steps.length; i++) {
      if (has(i - 1, slotOf(false), false) && has(i, slotOf(false), false)) plainPairs++;
      if (has(i - 1, slotOf(true), true) && has(i, slotOf(true), true)) maskedPairs++;
    }
    // (The fake engine refuses a masked sample whose slot has a sample in flight.)
    assert(maskedPairs < 20, `the constrained request is not pipelined (${maskedPairs} pairs)`);
    assert(plainPairs >= 30, `the unconstrained request is pipelined (${plainPairs} pairs)`);
  } finally {
    await runtime.close();
  }
});

Deno.test("grammar: a constrained request preempted (recompute) gets the same tokens at temperature 0", async () => {
  const prompt = (await tinyTokenizer()).encode("What is the time?");
  const alone = async () => {
    const { runtime } = await grammarRuntime();
    try {
      const grammar = await runtime.compileGrammar(LETTERS);
      return await run(
        runtime.submit({ ids: prompt, sampling: greedy(5), maxTokens: 25, grammar }),
      );
    } finally {
      await runtime.close();
    }
  };
  const reference = await alone();
  // 8 blocks of 4 per layer: the two requests need more, and the newest admitted is preempted.
  const { runtime } = await grammarRuntime({ blocksPerArena: [16], maxBlocksPerSeq: 8 });
  try {
    const grammar = await runtime.compileGrammar(LETTERS);
    const other = runtime.submit({ ids: prompt, maxTokens: 25, sampling: greedy(9), stopIds: [] });
    const constrained = runtime.submit({
      ids: prompt,
      sampling: greedy(5),
      maxTokens: 25,
      grammar,
    });
    const [, got] = await Promise.all([run(other), run(constrained)]);
    assert(runtime.stats().preemptions > 0, "a request was preempted");
    assertEquals(got, reference);
  } finally {
    await runtime.close();
  }
});

Deno.test("grammar: cancelling a constrained request disposes its matcher", async () => {
  const counts = await matcherCounts();
  const { runtime, tokenizer } = await grammarRuntime();
  try {
    const grammar = await runtime.compileGrammar({ type: "regex", pattern: "[a-z]{200}" });
    const h = runtime.submit({
      ids: tokenizer.encode("Go"),
      sampling: greedy(1),
      maxTokens: 300,
      grammar,
    });
    let n = 0;
    for await (const _ of h.tokens) if (++n === 3) h.cancel();
    assertEquals((await h.done).reason, "cancelled");
    assert(counts.made > 0);
    assertEquals(counts.disposed, counts.made);
  } finally {
    await runtime.close();
  }
});

Deno.test("grammar: a grammar that does not compile is an InvalidRequest naming the reason", async () => {
  const { runtime } = await grammarRuntime();
  try {
    const bad: GrammarSpec[] = [
      {
        type: "json_schema",
        schema: { type: "object", properties: { a: { $ref: "#/$defs/no" } } },
      },
      { type: "regex", pattern: "a(" },
      { type: "ebnf", grammar: 'root ::= "a" b' },
      { type: "choice", choices: [] },
    ];
    for (const spec of bad) {
      const err = await runtime.compileGrammar(spec).then(() => null, (e) => e);
      assert(err instanceof InvalidRequest, `${spec.type}: ${err}`);
      assertEquals([err.param, err.code], ["response_format", "invalid_grammar"]);
      assert(!/Aborted/.test(err.message), err.message);
    }
    // The module still compiles after its aborted calls.
    await runtime.compileGrammar({ type: "regex", pattern: "ok" });
  } finally {
    await runtime.close();
  }
});

Deno.test("grammar: compiled grammars are cached by spec, least recently used evicted", async () => {
  const t = await tinyTokenizer();
  const grammars = new Grammars(
    { vocabulary: () => t.vocabulary(), vocabSize: LOGITS, stopIds: t.eosTokenIds },
    2,
  );
  try {
    const spec = (n: number) => ({ type: "regex" as const, pattern: `x{${n}}` });
    const first = await grammars.compile(spec(1));
    const again = await grammars.compile(spec(1));
    assertEquals(again.key, first.key);
    assertEquals([grammars.cache.misses, grammars.cache.hits], [1, 1]);
    await grammars.compile(spec(2));
    await grammars.compile(spec(3)); // evicts spec(1)
    assertEquals(grammars.cache.size, 2);
    await grammars.compile(spec(1));
    assertEquals([grammars.cache.misses, grammars.cache.hits], [4, 1]);
    // A handle whose grammar was evicted still makes a matcher (compiled again).
    await grammars.compile(spec(4));
    await grammars.compile(spec(5));
    (await grammars.matcher(first)).dispose();
  } finally {
    await grammars.close();
  }
});
