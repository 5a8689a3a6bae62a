// Speculative decoding over a real engine on a generated model: the draft rows run beside the
// decode row in one step, and the tokens kept are the ones plain decoding gives, greedy and seeded,
// with stop ids and max_tokens reached inside accepted runs, under preemption, and when a request
// is cancelled; every block goes back. A random model accepts almost no prompt-lookup draft, so the
// drafter here proposes the tokens a plain run recorded, each with probability 0.8 (TraceDrafter).

import { Engine, type StepEngine } from "../../../engine/engine.ts";
import { writeTinyModel } from "../../../engine/sources/tiny_model.ts";
import { Runtime, type SubmitParams } from "../../../runtime/service.ts";
import { TraceDrafter } from "../../../bench/common/trace_drafter.ts";
import { assert, assertEquals } from "../../helpers/testing.ts";
import { testGpu } from "../../helpers/gpu.ts";
import { rng } from "../../helpers/random.ts";

const SPEC = {
  hiddenSize: 96,
  intermediateSize: 200,
  numLayers: 2,
  numHeads: 6,
  numKvHeads: 2,
  tied: true,
  dtype: "BF16",
  seed: 7,
} as const;
const MAX_SLOTS = 4;
const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };

async function withEngine(fn: (engine: StepEngine) => Promise<void>, gpuKvMb = 8) {
  const dir = await Deno.makeTempDir({ prefix: "sluice-speculative-" });
  await writeTinyModel(dir, SPEC);
  const engine = await Engine.load({
    modelDir: dir,
    gpu: await testGpu(),
    gpuKvMb,
    skipWarmUp: true,
    maxSlots: MAX_SLOTS,
    maxRows: 32,
  });
  // Each runtime closes its view of the engine, not the engine.
  const shared: StepEngine = {
    info: engine.info,
    step: (plan) => engine.step(plan),
    close: () => Promise.resolve(),
  };
  try {
    await fn(shared);
  } finally {
    await engine.close();
    await Deno.remove(dir, { recursive: true });
  }
}

function open(engine: StepEngine, drafter?: TraceDrafter): Runtime {
  return new Runtime(engine, {
    policy: "fcfs",
    maxQueue: 100,
    maxTokensLimit: 10_000,
    eosIds: [],
    ...(drafter ? { speculative: "ngram", speculativeTokens: 4 } : {}),
  }, drafter ? { drafter } : {});
}

function randomIds(seed: number, n: number, vocab: number): number[] {
  const next = rng(seed);
  return Array.from({ length: n }, () => Math.floor(next() * vocab));
}

async function collect(runtime: Runtime, req: SubmitParams): Promise<number[]> {
  const handle = runtime.submit(req);
  const ids: number[] = [];
  for await (const ev of handle.tokens) ids.push(ev.id);
  await handle.done;
  return ids;
}

/** Each request alone on a plain runtime, recorded for the drafter; then all together, speculating. */
async function plainThenSpeculating(engine: StepEngine, reqs: SubmitParams[]) {
  const vocab = engine.info.vocabSize;
  const plain = open(engine);
  const alone: number[][] = [];
  for (const q of reqs) alone.push(await collect(plain, q));
  await plain.close();
  const drafter = new TraceDrafter(0.8, vocab, 3);
  reqs.forEach((q, i) => drafter.record(q.ids, alone[i]));
  const runtime = open(engine, drafter);
  const out = await Promise.all(reqs.map((q) => collect(runtime, q)));
  const stats = runtime.stats();
  await runtime.close();
  return { alone, out, stats };
}

Deno.test("speculative: greedy and seeded requests, stop ids inside accepted runs: the tokens plain decoding gives", async () => {
  await withEngine(async (engine) => {
    const vocab = engine.info.vocabSize;
    const reqs: SubmitParams[] = [3, 17, 9, 26].map((len, i) => ({
      ids: randomIds(10 + i, len, vocab),
      maxTokens: [11, 19, 8, 23][i],
      sampling: i % 2 ? greedy : { temperature: 1.1, topK: 0, topP: 0.95, seed: 50 + i },
      stopIds: [],
    }));
    const { alone, out, stats } = await plainThenSpeculating(engine, reqs);
    assertEquals(out, alone);
    const spec = stats.speculation!;
    assert(spec.acceptedTokens >= spec.draftTokens / 2, JSON.stringify(spec));
    assertEquals(stats.kvBlocksUsed, 0);
    // Each request stops on its sixth token's id: inside a run.
    const stopping = reqs.map((q, i) => ({ ...q, stopIds: [alone[i][5]] }));
    const stopped = await plainThenSpeculating(engine, stopping);
    assertEquals(stopped.out, stopped.alone);
    assert(stopped.alone.every((ids, i) => ids.length < reqs[i].maxTokens!));
  });
});

Deno.test("speculative: under a KV budget that forces preemption, and with a request cancelled, each gets its own tokens", async () => {
  // 20 blocks of 16 positions over 2 layers for 4 requests of up to 45 + 30 positions.
  const headDim = SPEC.hiddenSize / SPEC.numHeads;
  const perBlock = 2 * 16 * SPEC.numKvHeads * headDim * 2;
  const table = SPEC.numLayers * MAX_SLOTS * Math.ceil(2048 / 16) * 4;
  await withEngine(async (engine) => {
    const vocab = engine.info.vocabSize;
    const reqs: SubmitParams[] = [30, 12, 45, 7].map((len, i) => ({
      ids: randomIds(300 + i, len, vocab),
      maxTokens: 30,
      sampling: i % 2 ? greedy : { temperature: 0.9, topK: 0, topP: 0.9, seed: 311 + i },
      stopIds: [],
    }));
    const { alone, out, stats } = await plainThenSpeculating(engine, reqs);
    assertEquals(out, alone);
    assert(stats.preemptions >= 1, `only ${stats.preemptions} preemptions`);
    assert(stats.speculation!.acceptedTokens > 0);
    assertEquals(stats.kvBlocksUsed, 0);
    // One cancelled after 7 tokens: nothing after the cancel, the others unchanged, blocks freed.
    const drafter = new TraceDrafter(0.8, vocab, 4);
    reqs.forEach((q, i) => drafter.record(q.ids, alone[i]));
    const runtime = open(engine, drafter);
    const ctrl = new AbortController();
    const cancelled = (async () => {
      const h = runtime.submit({ ...reqs[0], signal: ctrl.signal });
      const ids: number[] = [];
      for await (const ev of h.tokens) {
        assert(!ctrl.signal.aborted, "a token after the cancel");
        ids.push(ev.id);
        if (ids.length === 7) ctrl.abort();
      }
      return ids;
    })();
    const rest = await Promise.all(reqs.slice(1).map((q) => collect(runtime, q)));
    assertEquals(await cancelled, alone[0].slice(0, 7));
    assertEquals(rest, alone.slice(1));
    await collect(runtime, { ids: [1], maxTokens: 1, sampling: greedy });
    assertEquals(runtime.stats().kvBlocksUsed, 0);
    await runtime.close();
  }, (table + 20 * perBlock) / 2 ** 20);
});
