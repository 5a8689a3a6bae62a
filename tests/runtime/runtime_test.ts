// The runtime over a real engine on a generated model: greedy decoding against the reference,
// batch invariance, preemption by recompute, cancellation, request validation, and the
// `generate --json` contract.

import { type DistanceOf, distancePlanner } from "../helpers/distance_planner.ts";
import { type CostModel, Engine } from "../../engine/engine.ts";
import { costModelWithLayer } from "../helpers/cost_models.ts";
import { sumsOf } from "../../engine/kv/cost_model.ts";
import { openModelDir } from "../../engine/formats/open_model.ts";
import { writeTinyModel } from "../../engine/sources/tiny_model.ts";
import { Runtime, type SubmitParams } from "../../runtime/service.ts";
import type { PolicyName } from "../../runtime/policy/index.ts";
import { assert, assertEquals, assertThrows } from "../helpers/testing.ts";
import { testGpu } from "../helpers/gpu.ts";
import { rng } from "../helpers/random.ts";
import { referenceForward } from "../helpers/reference_llama.ts";

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

interface RuntimeSetup {
  maxSlots?: number;
  maxRows?: number;
  gpuKvMb?: number;
  policy?: PolicyName;
  prefixCache?: boolean;
  hostKvMb?: number;
  preempt?: "recompute" | "swap" | "partial";
  recompute?: "off" | "auto";
  /** Stands for the cost model the engine would profile at load (tests skip the profile). */
  costModel?: CostModel;
  writeThrough?: boolean;
  /** Every running request's distance, or one per request asked again every step. */
  offloadDistance?: number | DistanceOf;
  prefetchBlocks?: number;
  layerwisePrefill?: boolean;
  tokenCache?: boolean;
}

async function withEngine(
  fn: (runtime: Runtime, dir: string) => Promise<void> | void,
  opts: RuntimeSetup = {},
) {
  const dir = await Deno.makeTempDir({ prefix: "sluice-runtime-" });
  await writeTinyModel(dir, SPEC);
  const {
    policy = "fcfs",
    prefixCache = false,
    preempt,
    recompute,
    costModel,
    writeThrough,
    offloadDistance,
    prefetchBlocks,
    layerwisePrefill,
    tokenCache,
    ...engineOpts
  } = opts;
  const engine = await Engine.load({
    modelDir: dir,
    gpu: await testGpu(),
    gpuKvMb: 8,
    skipWarmUp: true,
    ...engineOpts,
  });
  if (costModel) engine.info.costModel = costModel;
  const changing = typeof offloadDistance === "function";
  const runtime = new Runtime(engine, {
    policy,
    prefixCache,
    preempt,
    recompute,
    writeThrough,
    ...(changing ? { offload: "uniform" } : { offloadDistance }),
    prefetchBlocks,
    layerwisePrefill,
    tokenCache,
    maxQueue: 1000,
    maxTokensLimit: 100_000,
    eosIds: [],
  }, changing ? { planner: distancePlanner(offloadDistance) } : {});
  try {
    await fn(runtime, dir);
  } finally {
    await runtime.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/** A KV budget (MiB) that holds `blocks` blocks in total for SPEC on the f16 path, table included. */
function budgetForBlocks(blocks: number, maxSlots: number, blockSize = 16, maxPos = 2048): number {
  const headDim = SPEC.hiddenSize / SPEC.numHeads;
  const perBlock = 2 * blockSize * SPEC.numKvHeads * headDim * 2;
  const table = SPEC.numLayers * maxSlots * Math.ceil(maxPos / blockSize) * 4;
  return (table + blocks * perBlock) / 2 ** 20;
}

function randomIds(seed: number, n: number, vocab: number): number[] {
  const next = rng(seed);
  return Array.from({ length: n }, () => Math.floor(next() * vocab));
}

const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };

async function collect(runtime: Runtime, req: SubmitParams): Promise<number[]> {
  const handle = runtime.submit(req);
  const ids: number[] = [];
  for await (const ev of handle.tokens) ids.push(ev.id);
  await handle.done;
  return ids;
}

Deno.test("greedy decoding follows the float64 reference", async () => {
  await withEngine(async (engine, dir) => {
    const files = await openModelDir(dir);
    const prompt = randomIds(3, 11, engine.info.vocabSize);
    const got = await collect(engine, {
      ids: prompt,
      maxTokens: 10,
      sampling: greedy,
      stopIds: [],
    });
    assertEquals(got.length, 10);
    const seq = [...prompt];
    for (const id of got) {
      const logits = (await referenceForward(files, seq)).at(-1)!;
      const best = Math.max(...logits);
      // The engine's choice must be the reference argmax up to f16 rounding of near-ties.
      const scale = Math.max(...logits.map(Math.abs));
      assert(
        best - logits[id] <= 2e-2 * scale,
        `token ${id} is ${best - logits[id]} below the best logit`,
      );
      seq.push(id);
    }
  });
});

Deno.test("temperature 0: tokens are the same alone and in a batch of 8 mixed-length requests", async () => {
  await withEngine(async (engine) => {
    const V = engine.info.vocabSize;
    const reqs = [3, 40, 1, 17, 65, 9, 28, 5].map((len, i) => ({
      ids: randomIds(100 + i, len, V),
      maxTokens: 6 + (i % 4) * 3,
      sampling: greedy,
      stopIds: [] as number[],
    }));
    const alone: number[][] = [];
    for (const r of reqs) alone.push(await collect(engine, r));
    const batched = await Promise.all(reqs.map((r) => collect(engine, r)));
    assertEquals(batched, alone);
  }, { maxRows: 48 });
});

Deno.test("seeded sampling is reproducible and independent of batching", async () => {
  await withEngine(async (engine) => {
    const V = engine.info.vocabSize;
    const req = (seed: number) => ({
      ids: randomIds(seed, 12, V),
      maxTokens: 12,
      sampling: { temperature: 1.2, topK: 40, topP: 0.95, seed },
      stopIds: [] as number[],
    });
    const alone = await collect(engine, req(5));
    const [batched] = await Promise.all([
      collect(engine, req(5)),
      collect(engine, req(6)),
      collect(engine, req(7)),
    ]);
    assertEquals(batched, alone);
    const other = await collect(engine, { ...req(5), sampling: { ...req(5).sampling, seed: 999 } });
    assert(other.join() !== alone.join(), "a different seed should change the sample");
  });
});

Deno.test("cancelled requests free every KV block", async () => {
  await withEngine(async (engine) => {
    const V = engine.info.vocabSize;
    const before = engine.stats();
    const handles = Array.from({ length: 12 }, (_, i) => {
      const ctrl = new AbortController();
      const h = engine.submit({
        ids: randomIds(i, 5 + i * 3, V),
        maxTokens: 200,
        sampling: greedy,
        stopIds: [],
        signal: ctrl.signal,
      });
      return { h, ctrl, i };
    });
    await Promise.all(handles.map(async ({ h, ctrl, i }) => {
      let n = 0;
      if (i % 3 === 0) ctrl.abort(); // some before admission or during prefill
      for await (const _ of h.tokens) if (++n === 2 + (i % 4)) ctrl.abort();
      assertEquals((await h.done).reason, "cancelled");
    }));
    // Blocks are released at the next step boundary; give the loop a moment with a new request.
    await collect(engine, { ids: [1, 2, 3], maxTokens: 2, sampling: greedy, stopIds: [] });
    const after = engine.stats();
    assertEquals(after.kvBlocksUsed, before.kvBlocksUsed);
    assertEquals(after.running + after.waiting + after.paused, 0);
  });
});

Deno.test("temperature 0: a request that reuses a cached prefix gets the tokens it gets without one", async () => {
  const V = 256;
  const system = randomIds(900, 70, V); // a shared opening: 4 full blocks of 16 and a bit
  const turns = [
    [...system, ...randomIds(901, 9, V)],
    [...system, ...randomIds(902, 23, V)],
    [...system, ...randomIds(903, 9, V), ...randomIds(904, 40, V)],
  ];
  const run = async (prefixCache: boolean) => {
    const out: number[][] = [];
    let hits = 0;
    await withEngine(async (engine) => {
      for (const ids of turns) {
        out.push(await collect(engine, { ids, maxTokens: 12, sampling: greedy, stopIds: [] }));
      }
      hits = engine.stats().prefix?.hitBlocks ?? 0;
    }, { prefixCache });
    return { out, hits };
  };
  const cold = await run(false);
  const warm = await run(true);
  assertEquals(warm.out, cold.out);
  // Turn 2 reuses the 4 system blocks; turn 3 also turn 1's fifth block and beyond.
  assert(warm.hits >= 8, `only ${warm.hits} blocks came from the cache`);
});

Deno.test("temperature 0: a request whose cached prefix comes back from the host tier gets the tokens it gets without the cache", async () => {
  const V = 256;
  const system = randomIds(910, 70, V); // 4 full blocks of 16 and a bit
  const first = [...system, ...randomIds(911, 9, V)];
  // 316 positions: every block of the 320-position pool, so the cached system blocks must leave.
  const other = randomIds(912, 300, V);
  const second = [...system, ...randomIds(913, 23, V)];
  const run = async (prefixCache: boolean) => {
    const out: number[][] = [];
    let stats!: ReturnType<Runtime["stats"]>;
    await withEngine(async (engine) => {
      for (const [ids, maxTokens] of [[first, 12], [other, 16], [second, 12]] as const) {
        out.push(await collect(engine, { ids, maxTokens, sampling: greedy, stopIds: [] }));
      }
      stats = engine.stats();
    }, { prefixCache, maxSlots: 2, gpuKvMb: budgetForBlocks(40, 2), hostKvMb: 1 });
    return { out, stats };
  };
  const cold = await run(false);
  const warm = await run(true);
  assertEquals(warm.out, cold.out);
  const prefix = warm.stats.prefix!;
  assert(prefix.demotions >= 4, `only ${prefix.demotions} cached blocks moved to the host`);
  assert(prefix.hostHitBlocks >= 4, `only ${prefix.hostHitBlocks} blocks came back from the host`);
});

/**
 * Eight requests run alone, then all at once in a pool of 40 blocks over 2 layers (320 positions
 * per layer, while they need up to 8 × (prompt + 40)): each must get the same tokens both times,
 * half of them greedy, half sampled. Returns the runtime's stats after the pressured run.
 */
async function tokensUnderPressure(
  setup: RuntimeSetup,
  seed: number,
  sampling = (i: number): SubmitParams["sampling"] =>
    i % 2 ? greedy : { temperature: 0.9, topK: 0, topP: 0.9, seed: seed + 11 + i },
) {
  const maxSlots = 8;
  let stats!: ReturnType<Runtime["stats"]>;
  await withEngine(async (engine) => {
    const V = engine.info.vocabSize;
    const reqs = [30, 12, 45, 7, 26, 60, 3, 18].map((len, i) => ({
      ids: randomIds(seed + i, len, V),
      maxTokens: 40,
      sampling: sampling(i),
      stopIds: [] as number[],
    }));
    const alone: number[][] = [];
    for (const r of reqs) alone.push(await collect(engine, r));
    const before = engine.stats().preemptions;
    const together = await Promise.all(reqs.map((r) => collect(engine, r)));
    assertEquals(together, alone);
    stats = engine.stats();
    stats.preemptions -= before;
    assertEquals([stats.kvBlocksUsed, stats.hostBlocksUsed], [0, 0]);
  }, { maxSlots, maxRows: 32, gpuKvMb: budgetForBlocks(40, maxSlots), ...setup });
  return stats;
}

for (const policy of ["fcfs", "reserve"] as const) {
  Deno.test(`temperature 0: ${policy} gives every request the tokens it gets alone, under a KV budget that forces ${policy === "fcfs" ? "preemption" : "queueing"}`, async () => {
    const s = await tokensUnderPressure({ policy }, 300);
    if (policy === "fcfs") assert(s.preemptions >= 2, `only ${s.preemptions} preemptions`);
    else assertEquals(s.preemptions, 0);
  });
}

Deno.test("temperature 0: requests with penalties and logit bias, preempted and recomputed in new slots, get the tokens they get alone", async () => {
  const controls = [
    { repetitionPenalty: 1.3 },
    { frequencyPenalty: 0.8, presencePenalty: 0.4 },
    { repetitionPenalty: 0.9, frequencyPenalty: -0.3, logitBias: [[5, 3]] as [number, number][] },
    { logitBias: [[17, -100], [40, 2]] as [number, number][] },
  ];
  const s = await tokensUnderPressure({}, 900, (i) => ({ ...greedy, ...controls[i % 4] }));
  assert(s.preemptions >= 2, `only ${s.preemptions} preemptions`);
});

for (const writeThrough of [false, true]) {
  Deno.test(`temperature 0: requests swapped to the host and back mid-stream get the tokens they get alone${writeThrough ? " (write-through)" : ""}`, async () => {
    const s = await tokensUnderPressure({ hostKvMb: 1, preempt: "swap", writeThrough }, 500);
    assert(s.swaps!.swapsIn >= 2, `only ${s.swaps!.swapsIn} swap-ins`);
    if (writeThrough) assert(s.swaps!.blocksWrittenThrough > 0);
  });
}

Deno.test("temperature 0: requests whose oldest KV was dropped and recomputed get the tokens they get alone", async () => {
  const s = await tokensUnderPressure({ preempt: "partial" }, 700);
  assert(s.partialResumes >= 1, `only ${s.partialResumes} partial resumes`);
});

// 64 rows a step: with 32, eight decode rows leave too few rows for any uncached share the pool
// needs. And a GPU's economics (a step costs mostly its weights): where rows cost what they cost,
// eq. 1's b/T prefers a smaller batch (the newest preempted) to recomputing for a larger one.
Deno.test("temperature 0: running requests whose oldest KV is uncached and recomputed in each step they decode (eLLM) get the tokens they get alone", async () => {
  const flat = costModelWithLayer(5, 0.001, {
    numLayers: SPEC.numLayers,
    // Heavy, so that the software adapter's measured steps do not re-fit it within the test.
    layerFit: sumsOf([[1, 5.001], [32, 5.032]], 1e6),
  });
  const s = await tokensUnderPressure({ tokenCache: true, maxRows: 64, costModel: flat }, 1100);
  assert(s.tokenCache!.uncachings >= 1, `only ${s.tokenCache!.uncachings} uncachings`);
  assert(s.tokenCache!.recomputeRows >= 16, `only ${s.tokenCache!.recomputeRows} recompute rows`);
});

/**
 * A cost model under which tokensUnderPressure's workload meets every choice: per layer, a step
 * costs 1 ms + 0.1 ms a row, and moving blocks 1 ms (a copy of K and one of V) + 0.5 ms a block
 * (16 positions, 2 KiB on the f16 path). Dropping the oldest block or two is cheapest where that
 * makes room; otherwise a swap pays for long requests, dropping everything for short ones.
 */
const MIXED_COSTS: CostModel = {
  numLayers: SPEC.numLayers,
  roundTripMs: 0,
  layer: { fixedMs: 1, perUnitMs: 0.1 },
  sample: { fixedMs: 0.5, perUnitMs: 0 },
  hostToDevice: { fixedMs: 0.5, perUnitMs: 0.5 / 2048 },
  deviceToHost: { fixedMs: 0.5, perUnitMs: 0.5 / 2048 },
  overlap: 0,
  // Heavy, so that the measured steps of a software adapter do not re-fit it within the test.
  layerFit: sumsOf([[1, 1.1], [32, 4.2]], 1e6),
};

Deno.test("temperature 0: with --recompute auto, requests swapped, partly dropped or all dropped by the cost model's choice get the tokens they get alone", async () => {
  const s = await tokensUnderPressure({
    hostKvMb: 1,
    writeThrough: true,
    recompute: "auto",
    costModel: MIXED_COSTS,
  }, 900);
  const c = s.preemptChoices;
  assertEquals(c.swap + c.dropOldest + c.dropAll, s.preemptions);
  assert(Math.min(c.swap, c.dropOldest, c.dropAll) >= 1, `chosen: ${JSON.stringify(c)}`);
});

Deno.test("temperature 0: requests at any offload distance, or one that changes mid-stream, get the tokens they get with every layer on the device", async () => {
  const maxSlots = 6;
  const run = async (setup: RuntimeSetup) => {
    let out!: number[][];
    let stats!: ReturnType<Runtime["stats"]>;
    await withEngine(async (engine) => {
      const V = engine.info.vocabSize;
      // Prompts over several blocks, so whole blocks reach the host and come back every step.
      out = await Promise.all([70, 33, 50, 9, 41, 64].map((len, i) =>
        collect(engine, {
          ids: randomIds(900 + i, len, V),
          maxTokens: 24,
          sampling: i % 2 ? greedy : { temperature: 0.8, topK: 0, topP: 0.95, seed: 40 + i },
          stopIds: [],
        })
      ));
      stats = engine.stats();
      assertEquals([stats.kvBlocksUsed, stats.hostBlocksUsed], [0, 0]);
    }, { maxSlots, maxRows: 32, gpuKvMb: budgetForBlocks(120, maxSlots), ...setup });
    return { out, stats };
  };
  const resident = await run({});
  const changing = (r: { id: number; generated: number }) => (r.id + (r.generated >> 3)) % 3;
  for (const offloadDistance of [1, 2, changing]) {
    const got = await run({ hostKvMb: 2, offloadDistance, prefetchBlocks: 30 });
    assertEquals(got.out, resident.out, `distance ${offloadDistance}`);
    const off = got.stats.offload!;
    assert(off.blocksPrefetched > 100, `only ${off.blocksPrefetched} blocks prefetched`);
    if (typeof offloadDistance === "function") {
      assert(off.blocksRestored > 0, "no layer came back when its distance changed");
    }
  }
});

for (const policy of ["slo", "tokenflow"] as const) {
  Deno.test(`temperature 0: ${policy}'s layer-wise prefill (every prefill split; a long prompt admitted beside running requests with a layer on the host) gives the tokens it gets with it off`, async () => {
    const maxSlots = 4;
    const run = async (layerwisePrefill: boolean) => {
      let out!: number[][];
      let stats!: ReturnType<Runtime["stats"]>;
      await withEngine(async (engine) => {
        const V = engine.info.vocabSize;
        // Two short requests are admitted first; the 300-token prompt (19 blocks a layer) then finds
        // 28 of the 40 request blocks free (the region takes 20 of 60): layer 1 goes to the host.
        out = await Promise.all([40, 40, 300].map((len, i) =>
          collect(engine, {
            ids: randomIds(1300 + i, len, V),
            maxTokens: i < 2 ? 48 : 8,
            sampling: i === 1 ? { temperature: 0.8, topK: 0, topP: 0.95, seed: 5 } : greedy,
            stopIds: [],
          })
        ));
        stats = engine.stats();
        assertEquals([stats.kvBlocksUsed, stats.hostBlocksUsed], [0, 0]);
      }, {
        policy,
        maxSlots,
        maxRows: 32,
        gpuKvMb: budgetForBlocks(60, maxSlots),
        hostKvMb: 2,
        layerwisePrefill,
        prefetchBlocks: layerwisePrefill ? 20 : undefined,
      });
      return { out, stats };
    };
    const off = await run(false);
    const on = await run(true);
    assertEquals(on.out, off.out);
    assert(on.stats.layerwiseAdmissions! >= 1, "the long prompt was not admitted layer-wise");
    assert(on.stats.offload!.blocksPrefetched > 0, "no offloaded block came back for a step");
    // Its offloaded layers were copied out in the steps that wrote them, after their layers.
    assert(on.stats.offload!.blocksOutAfterLayer > 0, "no block copied out after its layer");
    // Every admission was split: each request once, and again after each preemption or pause.
    assertEquals(on.stats.prefillSplits, 3 + on.stats.preemptions + on.stats.policyPauses);
  });
}

Deno.test("stats list a finished request while its paced buffer still plays out", async () => {
  await withEngine(async (engine) => {
    const h = engine.submit({
      ids: [1, 2, 3],
      maxTokens: 4,
      sampling: greedy,
      stopIds: [],
      readingRate: 2,
    });
    const done = h.done;
    // Generation ends long before four tokens play out at 2 tokens/s.
    const it = h.tokens[Symbol.asyncIterator]();
    await it.next();
    while (engine.stats().running > 0) await new Promise((r) => setTimeout(r, 20));
    const listed = engine.stats().requests.find((r) => r.id === h.id);
    assert(listed, "a stream still playing out is not in stats()");
    assertEquals(listed.state, "finished");
    assert(listed.buffered.tokens > 0 && listed.buffered.seconds > 0);
    h.cancel();
    await done;
    assertEquals(engine.stats().requests.find((r) => r.id === h.id), undefined);
  });
});

Deno.test("requests that can never run are refused with a clear error", async () => {
  await withEngine((engine) => {
    const V = engine.info.vocabSize;
    assertThrows(() => engine.submit({ ids: [], maxTokens: 1, sampling: greedy }), /empty/);
    assertThrows(
      () => engine.submit({ ids: [1], maxTokens: 1, sampling: greedy, readingRate: 1e-7 }),
      /reading_rate/,
    );
    assertThrows(
      () => engine.submit({ ids: [V], maxTokens: 1, sampling: greedy }),
      /outside the vocabulary/,
    );
    assertThrows(
      () => engine.submit({ ids: [1], maxTokens: engine.info.maxContext, sampling: greedy }),
      /exceeds the context/,
    );
  });
});

Deno.test("generate --json prints tokens and top logprobs per DESIGN.md's contract", async () => {
  const dir = await Deno.makeTempDir({ prefix: "sluice-cli-" });
  try {
    await writeTinyModel(dir, SPEC);
    const cmd = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "main.ts",
        "generate",
        "--model",
        dir,
        "--prompt-ids",
        "5,9,200,31",
        "--max-tokens",
        "5",
        "--temperature",
        "0",
        "--top-logprobs",
        "3",
        "--json",
      ],
      stdout: "piped",
      stderr: "piped",
    });
    const out = await cmd.output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert(out.success, stderr);
    const result = JSON.parse(new TextDecoder().decode(out.stdout));
    assertEquals(result.tokens.length, result.top_logprobs.length);
    const files = await openModelDir(dir);
    const seq = [5, 9, 200, 31];
    for (let i = 0; i < result.tokens.length; i++) {
      const top: [number, number][] = result.top_logprobs[i];
      assertEquals(top.length, 3);
      assertEquals(top[0][0], result.tokens[i], "greedy picks the likeliest id");
      const logits = (await referenceForward(files, seq)).at(-1)!;
      const max = Math.max(...logits);
      const lse = max + Math.log(logits.reduce((s, x) => s + Math.exp(x - max), 0));
      for (const [id, lp] of top) {
        assert(
          Math.abs(lp - (logits[id] - lse)) < 5e-2,
          `logprob of ${id}: ${lp} vs ${logits[id] - lse}`,
        );
      }
      seq.push(result.tokens[i]);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
