// One decode measurement, shared by `bench decode` and its --quant comparison (decode_quant.ts):
// `batch` requests decode together over a runtime, timed from the moment all have their first
// token.

import { Engine, type Gpu } from "../engine/engine.ts";
import { Runtime } from "../runtime/service.ts";

export const GREEDY = { temperature: 0, topK: 0, topP: 1, seed: 0 };

/**
 * A model loaded for decode measurement (16 slots, 64 MiB of KV, weights in storage: the engine's
 * default layout) and an fcfs runtime over it, as bench decode --quant and bench llamacpp run it.
 */
export async function loadDecodeRuntime(
  gpu: Gpu,
  modelDir: string,
  quantKernels: "float" | "int" = "float",
): Promise<{ engine: Engine; runtime: Runtime }> {
  const engine = await Engine.load({
    modelDir,
    gpu,
    maxSlots: 16,
    maxRows: 256,
    gpuKvMb: 64,
    quantKernels,
  });
  const runtime = new Runtime(engine, {
    policy: "fcfs",
    maxQueue: 64,
    maxTokensLimit: 100_000,
    eosIds: [],
  });
  return { engine, runtime };
}

/** A deterministic prompt of `n` ids, different for each `i`. */
export function prompt(i: number, n: number, vocab: number): number[] {
  return Array.from({ length: n }, (_, j) => (i * 7919 + j * 104729) % vocab);
}

export interface DecodeRun {
  tokensPerS: number;
  /** Engine steps between the batch's last first token and its end. */
  steps: number;
  /** Queue submissions over those steps (0 unless `submits` counts them). */
  submits: number;
}

/**
 * `batch` requests with 8-token prompts decode `steps` tokens each; timed from the moment all of
 * them have their first token (prefill done) to the last token.
 */
export async function measureDecode(
  runtime: Runtime,
  vocab: number,
  batch: number,
  steps: number,
  submits: () => number = () => 0,
): Promise<DecodeRun> {
  let firstAll = 0;
  let started = 0;
  let submitsBefore = 0;
  let stepsBefore = 0;
  const handles = Array.from(
    { length: batch },
    (_, i) =>
      runtime.submit({
        ids: prompt(i + 1, 8, vocab),
        maxTokens: steps + 1,
        sampling: GREEDY,
        stopIds: [],
      }),
  );
  const t1 = await Promise.all(handles.map(async (h) => {
    let n = 0;
    for await (const _ of h.tokens) {
      if (++n === 1 && ++started === batch) {
        firstAll = performance.now();
        submitsBefore = submits();
        stepsBefore = runtime.stats().steps;
      }
    }
    return performance.now();
  }));
  const end = Math.max(...t1);
  return {
    tokensPerS: (batch * steps) / ((end - firstAll) / 1000),
    steps: runtime.stats().steps - stepsBefore,
    submits: submits() - submitsBefore,
  };
}
