// The runtime's KV mechanisms with a q8_0 KV cache: its blocks are self-contained runs of bytes, so
// swaps, the prefix cache's host tier and per-layer offload move them as they are, and greedy
// tokens stay the same however a request was scheduled (runtime_test.ts checks the same on the
// default KV, on a model whose head dim q8_0 does not take). The budgets come from kvBlockBytes,
// the one place a block's size is computed.

import { Engine } from "../../engine/engine.ts";
import { kvBlockBytes } from "../../engine/kv/kv_format.ts";
import { writeTinyModel } from "../../engine/sources/tiny_model.ts";
import { Runtime, type SubmitParams } from "../../runtime/service.ts";
import { assert, assertEquals } from "../helpers/testing.ts";
import { testGpu } from "../helpers/gpu.ts";
import { rng } from "../helpers/random.ts";

const SPEC = {
  hiddenSize: 96,
  intermediateSize: 160,
  numLayers: 2,
  numHeads: 3,
  numKvHeads: 1,
  headDim: 32,
  tied: true,
  dtype: "BF16",
  seed: 21,
} as const;
const BLOCK = 16;
const MAX_POS = 2048;

interface Setup {
  maxSlots: number;
  /** Device pool size in blocks (K and V, every layer's together). */
  blocks: number;
  hostKvMb?: number;
  preempt?: "swap";
  writeThrough?: boolean;
  prefixCache?: boolean;
  offloadDistance?: number;
  prefetchBlocks?: number;
}

/** The --gpu-kv-mb that holds `blocks` q8_0 blocks of SPEC, block table included. */
function budgetMb(blocks: number, maxSlots: number): number {
  const perBlock = 2 *
    kvBlockBytes("q8_0", { blockSize: BLOCK, numKvHeads: SPEC.numKvHeads, headDim: SPEC.headDim });
  const table = SPEC.numLayers * maxSlots * Math.ceil(MAX_POS / BLOCK) * 4;
  return (table + blocks * perBlock) / 2 ** 20;
}

async function withRuntime(setup: Setup, fn: (runtime: Runtime) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "sluice-kv-q8-runtime-" });
  try {
    await writeTinyModel(dir, SPEC);
    const engine = await Engine.load({
      modelDir: dir,
      gpu: await testGpu(),
      kvDtype: "q8_0",
      gpuKvMb: budgetMb(setup.blocks, setup.maxSlots),
      hostKvMb: setup.hostKvMb,
      maxSlots: setup.maxSlots,
      maxRows: 32,
      blockSize: BLOCK,
      skipWarmUp: true,
    });
    const runtime = new Runtime(engine, {
      policy: "fcfs",
      preempt: setup.preempt,
      writeThrough: setup.writeThrough,
      prefixCache: setup.prefixCache ?? false,
      offloadDistance: setup.offloadDistance,
      prefetchBlocks: setup.prefetchBlocks,
      maxQueue: 1000,
      maxTokensLimit: 100_000,
      eosIds: [],
    });
    try {
      await fn(runtime);
    } finally {
      await runtime.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
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

Deno.test("q8_0 KV: requests swapped to the host and back mid-stream get the tokens they get alone", async () => {
  await withRuntime(
    { maxSlots: 8, blocks: 40, hostKvMb: 1, preempt: "swap", writeThrough: true },
    async (runtime) => {
      const V = runtime.info.vocabSize;
      const reqs = [30, 12, 45, 7, 26, 60, 3, 18].map((len, i) => ({
        ids: randomIds(500 + i, len, V),
        maxTokens: 40,
        sampling: greedy,
        stopIds: [] as number[],
      }));
      const alone: number[][] = [];
      for (const r of reqs) alone.push(await collect(runtime, r));
      const before = runtime.stats().swaps!.swapsIn;
      const together = await Promise.all(reqs.map((r) => collect(runtime, r)));
      assertEquals(together, alone);
      const s = runtime.stats();
      assert(s.swaps!.swapsIn - before >= 2, `only ${s.swaps!.swapsIn - before} swap-ins`);
      assertEquals([s.kvBlocksUsed, s.hostBlocksUsed], [0, 0]);
    },
  );
});

Deno.test("q8_0 KV: a cached prefix that comes back from the host tier gives the tokens of no cache", async () => {
  const V = 256;
  const system = randomIds(910, 70, V);
  const first = [...system, ...randomIds(911, 9, V)];
  // Fills the pool, so the cached system blocks must leave for the host.
  const other = randomIds(912, 300, V);
  const second = [...system, ...randomIds(913, 23, V)];
  const run = async (prefixCache: boolean) => {
    const out: number[][] = [];
    let stats!: ReturnType<Runtime["stats"]>;
    await withRuntime({ maxSlots: 2, blocks: 40, hostKvMb: 1, prefixCache }, async (runtime) => {
      for (const [ids, maxTokens] of [[first, 12], [other, 16], [second, 12]] as const) {
        out.push(await collect(runtime, { ids, maxTokens, sampling: greedy, stopIds: [] }));
      }
      stats = runtime.stats();
    });
    return { out, stats };
  };
  const cold = await run(false);
  const warm = await run(true);
  assertEquals(warm.out, cold.out);
  const prefix = warm.stats.prefix!;
  assert(prefix.hostHitBlocks >= 4, `only ${prefix.hostHitBlocks} blocks came back from the host`);
});

Deno.test("q8_0 KV: requests with every other layer offloaded get the tokens they get on the device", async () => {
  const run = async (offload: Partial<Setup>) => {
    let out!: number[][];
    let stats!: ReturnType<Runtime["stats"]>;
    await withRuntime({ maxSlots: 4, blocks: 120, ...offload }, async (runtime) => {
      const V = runtime.info.vocabSize;
      out = await Promise.all([70, 33, 9, 41].map((len, i) =>
        collect(runtime, {
          ids: randomIds(900 + i, len, V),
          maxTokens: 16,
          sampling: greedy,
          stopIds: [],
        })
      ));
      stats = runtime.stats();
    });
    return { out, stats };
  };
  const resident = await run({});
  const offloaded = await run({ hostKvMb: 2, offloadDistance: 1, prefetchBlocks: 30 });
  assertEquals(offloaded.out, resident.out);
  const off = offloaded.stats.offload!;
  assert(off.blocksPrefetched > 20, `only ${off.blocksPrefetched} blocks prefetched`);
});
