// The runtime's KV mechanisms measured end to end on the real engine (part of `bench kv`):
//   - swap reuse (FastSwitch): KV bytes a second swap-out moves when host copies stay valid after
//     a swap-in, against copying everything again, on one over-subscribed workload;
//   - prefix reuse: time to first token of a chat's second turn that shares a 1,000-token prefix
//     with the first, with the prefix cache on and off.

import { Engine, type EngineOptions, type Gpu } from "../engine/engine.ts";
import { demoModelDir } from "../engine/bench_api.ts";
import { Runtime, type RuntimeOptions, type SubmitParams } from "../runtime/service.ts";
import { smolShapedModelDir } from "./decode.ts";

const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };

async function withRuntime<T>(
  engineOptions: EngineOptions,
  options: Omit<RuntimeOptions, "maxQueue" | "maxTokensLimit" | "eosIds">,
  fn: (runtime: Runtime, engine: Engine) => Promise<T>,
): Promise<T> {
  const engine = await Engine.load(engineOptions);
  const runtime = new Runtime(engine, {
    ...options,
    maxQueue: 1000,
    maxTokensLimit: 100_000,
    eosIds: [],
  });
  try {
    return await fn(runtime, engine);
  } finally {
    await runtime.close();
  }
}

/** Runs a request to the end; returns its tokens and the time its first token arrived. */
async function run(
  runtime: Runtime,
  req: SubmitParams,
): Promise<{ ids: number[]; ttftMs: number }> {
  const t0 = performance.now();
  const handle = runtime.submit(req);
  const ids: number[] = [];
  let ttftMs = 0;
  for await (const ev of handle.tokens) {
    if (ids.length === 0) ttftMs = performance.now() - t0;
    ids.push(ev.id);
  }
  await handle.done;
  return { ids, ttftMs };
}

const ids = (seed: number, n: number, vocab: number) =>
  Array.from({ length: n }, (_, j) => (seed * 7919 + j * 104729) % vocab);

interface ReuseRun {
  reuse: boolean;
  swapsOut: number;
  swapsIn: number;
  repeatSwapsOut: number;
  repeatBlocksOut: number;
  blocksOut: number;
  blocksIn: number;
  blockBytes: number;
  tokens: number[][];
  seconds: number;
}

/**
 * Eight requests that do not fit the device pool together: fcfs preempts the newest by swapping,
 * and a resumed request is the newest again, so requests go out more than once.
 */
async function swapReuseRun(gpu: Gpu, modelDir: string, reuse: boolean): Promise<ReuseRun> {
  return await withRuntime(
    { modelDir, gpu, gpuKvMb: 0.4, hostKvMb: 16, maxSlots: 8, maxRows: 64, skipWarmUp: true },
    { policy: "fcfs", preempt: "swap", swapReuse: reuse },
    async (runtime, engine) => {
      const V = engine.info.vocabSize;
      const t0 = performance.now();
      const tokens = await Promise.all(
        Array.from(
          { length: 8 },
          (_, i) =>
            run(runtime, { ids: ids(i + 1, 120, V), maxTokens: 160, sampling: greedy, stopIds: [] })
              .then((r) => r.ids),
        ),
      );
      const s = runtime.stats().swaps!;
      return {
        reuse,
        swapsOut: s.swapsOut,
        swapsIn: s.swapsIn,
        repeatSwapsOut: s.repeatSwapsOut,
        repeatBlocksOut: s.repeatBlocksOut,
        blocksOut: s.blocksOut,
        blocksIn: s.blocksIn,
        blockBytes: engine.info.kvBlockBytes,
        tokens,
        seconds: (performance.now() - t0) / 1000,
      };
    },
  );
}

export async function benchSwapReuse(gpu: Gpu): Promise<string> {
  const dir = await demoModelDir();
  const runs = [await swapReuseRun(gpu, dir, true), await swapReuseRun(gpu, dir, false)];
  const same = JSON.stringify(runs[0].tokens) === JSON.stringify(runs[1].tokens);
  const mib = (blocks: number, r: ReuseRun) => (blocks * r.blockBytes / 2 ** 20).toFixed(2);
  const rows = runs.map((r) =>
    `| ${r.reuse ? "host copies reused" : "everything copied again"} | ${r.swapsOut} | ${
      mib(r.blocksOut, r)
    } | ${r.repeatSwapsOut} | ${
      mib(r.repeatBlocksOut / Math.max(1, r.repeatSwapsOut), r)
    } | ${r.swapsIn} | ${mib(r.blocksIn, r)} | ${r.seconds.toFixed(1)} |`
  );
  const [on, off] = runs;
  return [
    "#### Swap reuse (demo model, fcfs preempting by swap, 8 × (120-token prompt, 160 tokens))",
    "",
    "| host copies | swap-outs | MiB out | second and later swap-outs | MiB per such swap-out | " +
    "swap-ins | MiB in | run s |",
    "|---|---|---|---|---|---|---|---|",
    ...rows,
    "",
    `A second or later swap-out moved ${
      (on.repeatBlocksOut / Math.max(1, on.repeatSwapsOut) /
        Math.max(1e-9, off.repeatBlocksOut / Math.max(1, off.repeatSwapsOut)) * 100).toFixed(0)
    }% of the bytes with reuse that it moved without (the new KV only); all swap-outs together ${
      (on.blocksOut / Math.max(1, off.blocksOut) * 100).toFixed(0)
    }% (swaps: ${on.swapsOut} vs ${off.swapsOut}); tokens ${
      same ? "identical" : "DIFFER"
    } in both runs.`,
  ].join("\n");
}

export async function benchPrefixTtft(gpu: Gpu): Promise<string> {
  const dir = await smolShapedModelDir();
  const ttft = async (prefixCache: boolean) =>
    await withRuntime(
      { modelDir: dir, gpu, maxSlots: 4, maxRows: 128, skipWarmUp: true },
      { policy: "reserve", prefixCache },
      async (runtime, engine) => {
        const V = engine.info.vocabSize;
        const turn1 = [...ids(1, 1000, V), ...ids(2, 20, V)];
        const first = await run(runtime, {
          ids: turn1,
          maxTokens: 16,
          sampling: greedy,
          stopIds: [],
        });
        const turn2 = [...turn1, ...first.ids, ...ids(3, 20, V)];
        const second = await run(runtime, {
          ids: turn2,
          maxTokens: 4,
          sampling: greedy,
          stopIds: [],
        });
        return { first: first.ttftMs, second: second.ttftMs, tokens: second.ids };
      },
    );
  const off = await ttft(false);
  const on = await ttft(true);
  return [
    "#### Prefix cache: a chat's second turn (SmolLM2-135M shape, 1,020-token first turn)",
    "",
    "| prefix cache | turn 1 TTFT | turn 2 TTFT (1,056 tokens, 1,036 shared) |",
    "|---|---|---|",
    `| off | ${(off.first / 1000).toFixed(2)} s | ${(off.second / 1000).toFixed(2)} s |`,
    `| on | ${(on.first / 1000).toFixed(2)} s | ${(on.second / 1000).toFixed(2)} s |`,
    "",
    `Turn 2 is ${(off.second / on.second).toFixed(1)}× faster to its first token with the cache; ` +
    `its tokens are ${
      JSON.stringify(on.tokens) === JSON.stringify(off.tokens) ? "identical" : "DIFFERENT"
    }.`,
  ].join("\n");
}
