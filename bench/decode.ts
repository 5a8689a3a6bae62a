// Decode and prefill throughput of the whole engine on a generated SmolLM2-135M-shaped model.
// Reports tokens/s at batch 1, 4 and 16, prefill tokens/s, and dispatches and submissions per step.

import { z } from "zod";
import { Engine } from "../engine/engine.ts";
import { openGpu } from "../engine/gpu/device.ts";
import { Runtime } from "../runtime/service.ts";
import { writeTinyModel } from "../engine/model/tiny_model.ts";
import { parseBenchFlags } from "./cli.ts";

const Flags = z.object({
  tokens: z.coerce.number().int().min(1).max(100_000).default(24),
});

export const USAGE = `usage: deno task bench decode [--tokens N]

Decode and prefill throughput of the whole engine on a generated SmolLM2-135M-shaped model: tokens/s
at batch 1, 4 and 16, prefill tokens/s, dispatches and submissions per step.

  --tokens N    decode steps measured per batch size (default 24)`;

/** SmolLM2-135M's shape with random weights (no download possible here). */
export const SMOLLM2_SHAPE = {
  hiddenSize: 576,
  intermediateSize: 1536,
  numLayers: 30,
  numHeads: 9,
  numKvHeads: 3,
  vocabSize: 49152,
  tied: true,
  dtype: "BF16",
  maxPositionEmbeddings: 8192,
  ropeTheta: 100000,
  seed: 135,
} as const;

export async function smolShapedModelDir(): Promise<string> {
  const cache = Deno.env.get("SLUICE_CACHE") ?? `${Deno.env.get("HOME") ?? "/tmp"}/.cache/sluice`;
  const dir = `${cache}/bench-smollm2-shape-v1`;
  try {
    await Deno.stat(`${dir}/config.json`);
  } catch {
    console.error(`writing a SmolLM2-shaped random model to ${dir} ...`);
    const tmp = `${dir}.tmp-${Deno.pid}`;
    await writeTinyModel(tmp, SMOLLM2_SHAPE);
    await Deno.rename(tmp, dir);
  }
  return dir;
}

export async function benchDecode(args: string[]): Promise<string> {
  const steps = parseBenchFlags(Flags, args).tokens;
  const gpu = await openGpu();
  let submits = 0;
  const queue = gpu.device.queue;
  const submit = queue.submit.bind(queue);
  queue.submit = (buffers: GPUCommandBuffer[]) => {
    submits++;
    return submit(buffers);
  };
  const engine = await Engine.load({
    modelDir: await smolShapedModelDir(),
    gpu,
    maxSlots: 16,
    maxRows: 256,
    gpuKvMb: 512,
  });
  const runtime = new Runtime(engine, {
    policy: "fcfs",
    maxQueue: 64,
    maxTokensLimit: 100_000,
    eosIds: [],
  });
  const rows: string[] = [];
  const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
  const V = engine.info.vocabSize;
  const prompt = (i: number, n: number) =>
    Array.from({ length: n }, (_, j) => (i * 7919 + j * 104729) % V);

  // Prefill: one 256-token prompt, one sampled token.
  {
    const t0 = performance.now();
    const h = runtime.submit({ ids: prompt(0, 256), maxTokens: 1, sampling: greedy, stopIds: [] });
    for await (const _ of h.tokens);
    const s = (performance.now() - t0) / 1000;
    rows.push(
      `| prefill, 256-token prompt | ${(256 / s).toFixed(1)} tokens/s | time to first token ${
        (s * 1000).toFixed(0)
      } ms |`,
    );
  }

  let base = 0;
  for (const batch of [1, 4, 16]) {
    let firstAll = 0;
    let started = 0;
    const submitsBefore = { n: 0 };
    const stepsBefore = { n: 0 };
    const handles = Array.from(
      { length: batch },
      (_, i) =>
        runtime.submit({
          ids: prompt(i + 1, 8),
          maxTokens: steps + 1,
          sampling: greedy,
          stopIds: [],
        }),
    );
    const t1 = await Promise.all(handles.map(async (h) => {
      let n = 0;
      for await (const _ of h.tokens) {
        if (++n === 1 && ++started === batch) {
          firstAll = performance.now();
          submitsBefore.n = submits;
          stepsBefore.n = runtime.stats().steps;
        }
      }
      return performance.now();
    }));
    const end = Math.max(...t1);
    const decodeSteps = runtime.stats().steps - stepsBefore.n;
    const tokS = (batch * steps) / ((end - firstAll) / 1000);
    if (batch === 1) base = tokS;
    const perStep = (submits - submitsBefore.n) / Math.max(1, decodeSteps);
    rows.push(
      `| decode, batch ${batch} | ${tokS.toFixed(1)} tokens/s | ${
        (tokS / base).toFixed(2)
      }× batch 1; ` +
        `${perStep.toFixed(2)} submissions/step over ${decodeSteps} steps |`,
    );
  }
  const info = engine.info;
  const dispatches = info.dispatchesPerStep;
  await runtime.close();
  return [
    `### Decode benchmark (${info.adapter}, ${info.dtype}, SmolLM2-135M shape, random weights)`,
    "",
    `Dispatches per step: ${dispatches}`,
    "",
    "| measurement | throughput | notes |",
    "|---|---|---|",
    ...rows,
  ].join("\n");
}
