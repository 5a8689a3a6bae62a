// `deno task bench kv --only dtype`: what a quantized KV cache (--kv-dtype q8_0) costs in accuracy
// and buys in capacity, against f16 KV, on one model.
//
// Accuracy: each prompt is decoded greedily with the baseline KV for a number of steps; the same
// tokens are then fed to an engine with the candidate KV (teacher forcing, so one early flip does
// not make every later step incomparable), and at every step we compare the two next-token
// distributions: greedy agreement (the candidate's argmax is the baseline's token) and
// |Δ logprob| of the baseline's token. Capacity: the pools both engines build from one
// --gpu-kv-mb, in tokens per layer and in requests of a given length held at once. The whole-model
// test (tests/engine/kv_q8_model_test.ts) runs the same measurement on generated models.

import { Engine, type Gpu, type KvDtype } from "../engine/engine.ts";
import { BlockPool } from "../runtime/bench_api.ts";
import { blocksPerLayer, openModelDir } from "../engine/bench_api.ts";
import { Tokenizer } from "../runtime/service.ts";

export interface KvDtypeRun {
  modelDir: string;
  gpu: Gpu;
  prompts: number[][];
  /** Tokens decoded per prompt. */
  steps: number;
  /** Device KV budget of both engines (MiB). */
  gpuKvMb: number;
  baseline: KvDtype;
  candidate: KvDtype;
}

export interface KvDtypeAccuracy {
  /** Steps compared, over all prompts. */
  steps: number;
  /** Fraction of steps where the candidate's argmax is the baseline's greedy token. */
  greedyAgreement: number;
  /** Mean and largest |logprob_candidate - logprob_baseline| of the baseline's token (nats). */
  meanAbsDLogprob: number;
  maxAbsDLogprob: number;
  /** Largest |Δ logprob| over the whole vocabulary, the worst step (nats). */
  maxAbsDLogprobAnyToken: number;
}

/** One step's next-token log-probabilities. */
function logSoftmax(logits: Float32Array): Float64Array {
  let max = -Infinity;
  for (const x of logits) max = Math.max(max, x);
  let sum = 0;
  for (const x of logits) sum += Math.exp(x - max);
  const lse = max + Math.log(sum);
  return Float64Array.from(logits, (x) => x - lse);
}

function argmax(xs: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < xs.length; i++) if (xs[i] > xs[best]) best = i;
  return best;
}

const GREEDY = { temperature: 0, topK: 0, topP: 1, seed: 0 };

/**
 * Runs `prompt` then `steps` tokens in slot 0: the forced ones where given, else the argmax.
 * Returns the log-probabilities before each generated token.
 */
async function decodeSequence(
  engine: Engine,
  prompt: number[],
  steps: number,
  forced?: number[],
): Promise<{ tokens: number[]; logprobs: Float64Array[] }> {
  const pool = new BlockPool(engine.info);
  const ids = [...prompt];
  const logprobs: Float64Array[] = [];
  let sampling = [{ slot: 0, params: GREEDY }];
  let from = 0;
  const chunk = engine.info.maxRows;
  while (logprobs.length < steps) {
    const to = Math.min(ids.length, from + chunk);
    const added = pool.growAll(0, to);
    if (!added) throw new Error(`the KV pool cannot hold ${to} tokens`);
    const tables = added.flatMap((blocks, layer) =>
      blocks.length === 0
        ? []
        : [{ slot: 0, layer, first: pool.table(0, layer).length - blocks.length, blocks }]
    );
    const rows = ids.slice(from, to).map((token, i) => ({ slot: 0, pos: from + i, token }));
    const last = to === ids.length;
    await engine.step({
      tables,
      sampling,
      rows,
      samples: last ? [{ row: rows.length - 1 }] : [],
      wantTopLogprobs: false,
    });
    sampling = [];
    from = to;
    if (!last) continue;
    const [logits] = await engine.readLogits(1);
    const lp = logSoftmax(logits);
    logprobs.push(lp);
    ids.push(forced?.[logprobs.length - 1] ?? argmax(lp));
  }
  return { tokens: ids.slice(prompt.length), logprobs };
}

async function load(run: KvDtypeRun, kvDtype: KvDtype): Promise<Engine> {
  const longest = Math.max(...run.prompts.map((p) => p.length));
  return await Engine.load({
    modelDir: run.modelDir,
    gpu: run.gpu,
    kvDtype,
    gpuKvMb: run.gpuKvMb,
    maxSlots: 1,
    maxRows: Math.min(256, longest),
    maxTopLogprobs: 1,
    skipWarmUp: true,
  });
}

/** Greedy agreement and logprob differences of `candidate` KV against `baseline` KV. */
export async function measureKvDtypeAccuracy(run: KvDtypeRun): Promise<KvDtypeAccuracy> {
  const base: { tokens: number[]; logprobs: Float64Array[] }[] = [];
  const baseline = await load(run, run.baseline);
  try {
    for (const p of run.prompts) base.push(await decodeSequence(baseline, p, run.steps));
  } finally {
    await baseline.close();
  }
  const candidate = await load(run, run.candidate);
  let steps = 0, agree = 0, sumAbs = 0, maxAbs = 0, maxAny = 0;
  try {
    for (const [i, p] of run.prompts.entries()) {
      const { tokens, logprobs } = base[i];
      const got = await decodeSequence(candidate, p, run.steps, tokens);
      got.logprobs.forEach((lp, s) => {
        const want = logprobs[s];
        const d = Math.abs(lp[tokens[s]] - want[tokens[s]]);
        steps++;
        if (argmax(lp) === tokens[s]) agree++;
        sumAbs += d;
        maxAbs = Math.max(maxAbs, d);
        for (let t = 0; t < lp.length; t++) maxAny = Math.max(maxAny, Math.abs(lp[t] - want[t]));
        if (!Number.isFinite(d)) maxAbs = maxAny = NaN;
      });
    }
  } finally {
    await candidate.close();
  }
  return {
    steps,
    greedyAgreement: agree / steps,
    meanAbsDLogprob: sumAbs / steps,
    maxAbsDLogprob: maxAbs,
    maxAbsDLogprobAnyToken: maxAny,
  };
}

export interface KvDtypeCapacity {
  kvDtype: KvDtype;
  /** Bytes of one block, K and V, of one layer. */
  blockBytes: number;
  /** Tokens every layer could hold at once. */
  tokens: number;
  /** Requests of `requestTokens` tokens held at once (whole blocks each). */
  requests: number;
}

/** The pool each dtype builds from `gpuKvMb` on this model, and what it holds. */
export async function measureKvDtypeCapacity(
  gpu: Gpu,
  modelDir: string,
  gpuKvMb: number,
  requestTokens: number,
  maxSlots: number,
  kvDtypes: readonly KvDtype[],
): Promise<KvDtypeCapacity[]> {
  const out: KvDtypeCapacity[] = [];
  for (const kvDtype of kvDtypes) {
    const engine = await Engine.load({
      modelDir,
      gpu,
      kvDtype,
      gpuKvMb,
      maxSlots,
      maxTopLogprobs: 1,
      skipWarmUp: true,
    });
    try {
      const { info } = engine;
      const perLayer = blocksPerLayer(info);
      out.push({
        kvDtype,
        blockBytes: info.kvBlockBytes,
        tokens: perLayer * info.blockSize,
        requests: Math.floor(perLayer / Math.ceil(requestTokens / info.blockSize)),
      });
    } finally {
      await engine.close();
    }
  }
  return out;
}

/** Prompts for the accuracy run: short passages of ordinary prose (written for this bench). */
const PASSAGES = [
  "The river had frozen early that year, and the children of the village walked across it to " +
  "school each morning, listening to the ice creak beneath their boots as the sun rose",
  "To make a good loaf of bread you need flour, water, salt and time. Most of the work is done " +
  "by the yeast while you wait, so patience matters more than strength or skill",
  "The committee met on Tuesday to review the budget for the new library. After a long " +
  "discussion about the roof, the members agreed to postpone the vote until the engineers reported",
  "In the first chapter of the book, the author explains why maps always lie a little: a round " +
  "planet cannot be flattened onto paper without stretching some places and shrinking others",
];

export interface KvDtypeBenchOptions {
  gpu: Gpu;
  modelDir: string;
  candidate: KvDtype;
  gpuKvMb: number;
  steps: number;
  /** Request length for the capacity column (prompt and output together). */
  requestTokens: number;
}

/** The accuracy and capacity report, candidate against f16 KV. */
export async function benchKvDtype(o: KvDtypeBenchOptions): Promise<string> {
  const tokenizer = new Tokenizer(await openModelDir(o.modelDir));
  const prompts = PASSAGES.map((p) => tokenizer.encode(p));
  const acc = await measureKvDtypeAccuracy({
    modelDir: o.modelDir,
    gpu: o.gpu,
    prompts,
    steps: o.steps,
    gpuKvMb: o.gpuKvMb,
    baseline: "f16",
    candidate: o.candidate,
  });
  // Slots enough that the budget, not the batch, bounds what the pool holds.
  const cap = await measureKvDtypeCapacity(
    o.gpu,
    o.modelDir,
    o.gpuKvMb,
    o.requestTokens,
    256,
    ["f16", o.candidate],
  );
  const [f16, other] = cap;
  const rows = cap.map((c) =>
    `| ${c.kvDtype} | ${c.blockBytes} | ${c.tokens} | ${c.requests} | ` +
    `${(c.requests / Math.max(1, f16.requests)).toFixed(2)}× |`
  );
  return [
    `KV dtype ${o.candidate} against f16 KV (${o.modelDir}): ${prompts.length} prompts of ` +
    `${prompts.map((p) => p.length).join("/")} tokens, ${o.steps} greedy steps each, ` +
    `teacher-forced on f16's tokens`,
    "",
    "| measurement | result |",
    "| --- | --- |",
    `| greedy agreement (${acc.steps} steps) | ${(100 * acc.greedyAgreement).toFixed(1)} % |`,
    `| mean / max \\|Δ logprob\\| of f16's token | ${acc.meanAbsDLogprob.toExponential(2)} / ` +
    `${acc.maxAbsDLogprob.toExponential(2)} nats |`,
    `| max \\|Δ logprob\\| over the vocabulary | ${
      acc.maxAbsDLogprobAnyToken.toExponential(2)
    } nats |`,
    "",
    `Capacity at --gpu-kv-mb ${o.gpuKvMb}, requests of ${o.requestTokens} tokens:`,
    "",
    "| KV dtype | block bytes (K+V, one layer) | tokens per layer | requests held | vs f16 |",
    "| --- | --- | --- | --- | --- |",
    ...rows,
    "",
    `${o.candidate} holds ${(other.tokens / f16.tokens).toFixed(2)}× the tokens of f16.`,
  ].join("\n");
}
