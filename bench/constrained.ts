// What constrained decoding costs, on the engine and runtime (no HTTP): tokens/s of one constrained
// stream against one unconstrained one, and of 8 unconstrained streams decoding beside 8
// constrained ones against 16 unconstrained (issue 20's goal: the unconstrained keep >= 90% of
// their per-stream throughput); and the grammar compile time of a typical schema on the model's
// vocabulary. A constrained request is not pipelined (its next mask needs its last token), so
// its own rate is expected to fall; the question is what it costs the others.

import { z } from "zod";
import { Engine, openGpu } from "../engine/engine.ts";
import { openModelDir } from "../engine/bench_api.ts";
import type { CompiledGrammarHandle, Runtime } from "../runtime/service.ts";
import { Runtime as RuntimeClass, Tokenizer } from "../runtime/service.ts";
import { parseBenchFlags } from "./common/cli.ts";
import { smolShapedModelDir } from "./common/smol_model.ts";
import { prompt } from "./decode_measure.ts";

const Flags = z.object({
  tokens: z.coerce.number().int().min(4).max(10_000).default(48),
  rounds: z.coerce.number().int().min(1).max(10).default(2),
});

export const USAGE = `usage: deno task bench constrained [--tokens N] [--rounds N]

On the SmolLM2-135M-shaped random model: decode tokens/s per stream of 1 unconstrained and 1
constrained stream, and of 16 unconstrained against 8 unconstrained + 8 constrained streams (the
goal: the unconstrained streams keep >= 90% of their per-stream rate); grammar compile times.

  --tokens N   tokens each stream decodes (default 48)
  --rounds N   times each mix is measured, interleaved; medians reported (default 2)`;

/**
 * The constrained streams' grammar: lowercase words separated by spaces that never end, so every
 * stream decodes exactly its max_tokens whatever the random model draws, and each step's mask has
 * most of the vocabulary banned (as a JSON string's content would).
 */
const ENDLESS = { type: "ebnf" as const, grammar: 'root ::= [a-z]+ (" " [a-z]+)* "."  root' };

/** A tool-call-sized schema: what compile time is measured on. */
const TYPICAL_SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 20 },
    age: { type: "integer", minimum: 0, maximum: 99 },
    email: { type: "string", format: "email" },
    role: { enum: ["admin", "user", "guest"] },
    tags: { type: "array", items: { type: "string", maxLength: 8 }, maxItems: 4 },
    address: {
      type: "object",
      properties: {
        city: { type: "string", maxLength: 16 },
        zip: { type: "string", pattern: "^[0-9]{5}$" },
      },
      required: ["city", "zip"],
      additionalProperties: false,
    },
  },
  required: ["name", "age", "role", "tags", "address"],
  additionalProperties: false,
};

interface StreamRate {
  constrained: boolean;
  /** Tokens after the first, per second between the first token and the last. */
  tokensPerS: number;
}

/** `plain` unconstrained and `constrained` constrained streams, started together. */
async function measureMix(
  runtime: Runtime,
  vocab: number,
  plain: number,
  constrained: number,
  tokens: number,
  grammar: CompiledGrammarHandle,
): Promise<StreamRate[]> {
  const sampling = { temperature: 1, topK: 0, topP: 1, seed: 0 };
  const handles = Array.from({ length: plain + constrained }, (_, i) => {
    const isConstrained = i >= plain;
    return {
      constrained: isConstrained,
      handle: runtime.submit({
        ids: prompt(i + 1, 8, vocab),
        maxTokens: tokens,
        sampling: { ...sampling, seed: i + 1 },
        stopIds: [],
        ...(isConstrained ? { grammar } : {}),
      }),
    };
  });
  return await Promise.all(handles.map(async ({ constrained, handle }) => {
    let first = 0;
    let n = 0;
    for await (const _ of handle.tokens) if (++n === 1) first = performance.now();
    const info = await handle.done;
    if (info.completionTokens !== tokens) {
      throw new Error(`a stream ended after ${info.completionTokens} tokens (${info.reason})`);
    }
    return { constrained, tokensPerS: (n - 1) / ((performance.now() - first) / 1000) };
  }));
}

interface JumpRun {
  tokens: number;
  /** Tokens the grammar forced: taken without a sample (jump-forward), logprob 0. */
  forced: number;
  steps: number;
}

/**
 * Answers to the typical schema, one at a time: its tokens, those the grammar forced, and the
 * engine steps it took. Without jump-forward a constrained request takes one step per token.
 */
async function measureJumps(
  runtime: Runtime,
  vocab: number,
  grammar: CompiledGrammarHandle,
  seeds: number,
): Promise<JumpRun> {
  const run = { tokens: 0, forced: 0, steps: 0 };
  for (let seed = 1; seed <= seeds; seed++) {
    const before = runtime.stats().steps;
    const handle = runtime.submit({
      ids: prompt(seed, 8, vocab),
      maxTokens: 1000,
      sampling: { temperature: 1, topK: 0, topP: 1, seed },
      grammar,
    });
    for await (const t of handle.tokens) {
      run.tokens++;
      if (t.logprob === 0 && t.top.length === 0) run.forced++;
    }
    await handle.done;
    run.steps += runtime.stats().steps - before;
  }
  return run;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export async function benchConstrained(args: string[]): Promise<string> {
  const flags = parseBenchFlags(Flags, args);
  const dir = await smolShapedModelDir();
  const files = await openModelDir(dir);
  const tokenizer = new Tokenizer(files);
  const engine = await Engine.load({
    modelDir: dir,
    gpu: await openGpu(),
    maxSlots: 16,
    maxRows: 64,
    gpuKvMb: 256,
  });
  const runtime = new RuntimeClass(engine, {
    policy: "fcfs",
    maxQueue: 64,
    maxTokensLimit: 100_000,
    eosIds: tokenizer.eosTokenIds,
    vocabulary: () => tokenizer.vocabulary(),
  });
  const V = engine.info.vocabSize;

  // Compile times: the first compile also builds the vocabulary's tokenizer info.
  const t0 = performance.now();
  const endless = await runtime.compileGrammar(ENDLESS);
  const firstMs = performance.now() - t0;
  const t1 = performance.now();
  await runtime.compileGrammar({ type: "json_schema", schema: TYPICAL_SCHEMA });
  const schemaMs = performance.now() - t1;
  const t2 = performance.now();
  const typical = await runtime.compileGrammar({ type: "json_schema", schema: TYPICAL_SCHEMA });
  const cachedMs = performance.now() - t2;

  const T = flags.tokens;
  const mixes = [
    { name: "1 unconstrained", plain: 1, constrained: 0 },
    { name: "1 constrained", plain: 0, constrained: 1 },
    { name: "16 unconstrained", plain: 16, constrained: 0 },
    { name: "8 unconstrained + 8 constrained", plain: 8, constrained: 8 },
  ];
  // Per mix and round: mean per-stream rate of its unconstrained and its constrained streams.
  const plainRates = new Map<string, number[]>();
  const constrainedRates = new Map<string, number[]>();
  for (let round = 0; round < flags.rounds; round++) {
    for (const mix of mixes) {
      const rates = await measureMix(runtime, V, mix.plain, mix.constrained, T, endless);
      const p = rates.filter((r) => !r.constrained).map((r) => r.tokensPerS);
      const c = rates.filter((r) => r.constrained).map((r) => r.tokensPerS);
      if (p.length) plainRates.set(mix.name, [...(plainRates.get(mix.name) ?? []), mean(p)]);
      if (c.length) {
        constrainedRates.set(mix.name, [...(constrainedRates.get(mix.name) ?? []), mean(c)]);
      }
    }
  }
  const jumps = await measureJumps(runtime, V, typical, 5);
  const info = engine.info;
  await runtime.close();

  const med = (m: Map<string, number[]>, k: string) => median(m.get(k)!);
  const single = med(plainRates, "1 unconstrained");
  const singleC = med(constrainedRates, "1 constrained");
  const alone16 = med(plainRates, "16 unconstrained");
  const beside = med(plainRates, "8 unconstrained + 8 constrained");
  const besideC = med(constrainedRates, "8 unconstrained + 8 constrained");
  const kept = beside / alone16;
  const fmt = (x: number) => x.toFixed(2);
  return [
    `### Constrained decoding (${info.adapter}, ${info.dtype}, SmolLM2-135M shape, random weights)`,
    "",
    `${T} tokens per stream, temperature 1, ${flags.rounds} rounds interleaved, medians of the`,
    "per-stream rate (tokens after the first, per second from the first token to the last).",
    "Constrained streams use an endless word grammar, so every stream decodes all its tokens.",
    "",
    "| mix | unconstrained, per stream | constrained, per stream |",
    "|---|---|---|",
    `| 1 stream | 1.00× (base) | ${fmt(singleC / single)}× |`,
    `| 16 unconstrained | ${fmt(alone16 / single)}× | — |`,
    `| 8 unconstrained + 8 constrained | ${fmt(beside / single)}× | ${fmt(besideC / single)}× |`,
    "",
    `Unconstrained streams beside constrained ones keep **${(kept * 100).toFixed(0)}%** of their ` +
    `per-stream rate among 16 unconstrained (goal >= 90%: ${kept >= 0.9 ? "met" : "not met"}).`,
    "",
    `Jump-forward: 5 answers to the typical schema took ${jumps.tokens} tokens in ` +
    `${jumps.steps} engine steps; ${jumps.forced} tokens ` +
    `(${(100 * jumps.forced / jumps.tokens).toFixed(0)}%) were forced by the grammar and taken ` +
    `without a sample (${(jumps.tokens / jumps.steps).toFixed(2)} tokens per step; 1.00 without).`,
    "",
    `Grammar compile (vocabulary of ${tokenizer.vocabulary().tokens.length} tokens, logits ${V}): ` +
    `first grammar incl. tokenizer info ${firstMs.toFixed(0)} ms; a typical schema ` +
    `${schemaMs.toFixed(0)} ms; the same schema again (cache) ${cachedMs.toFixed(2)} ms.`,
  ].join("\n");
}
