// One whole-model check shared by the architecture tests: a random prompt prefilled with every row
// sampled, then a greedy decode, each step's logits within a bound of the float64 reference
// (tests/helpers/reference_llama.ts) and each greedy token the reference's (or a near-tie within
// the bound).

import { Engine, type EngineOptions } from "../../engine/engine.ts";
import type { ModelFiles } from "../../engine/formats/model_files.ts";
import { BlockPool } from "../../runtime/kv/block_pool.ts";
import { assertClose } from "./compare.ts";
import { rng } from "./random.ts";
import { referenceForward } from "./reference_llama.ts";
import { assert } from "./testing.ts";

export interface ModelCheck {
  /** Prompt tokens (random ids). */
  prompt: number;
  /** Greedy decode steps after the prefill. */
  generated: number;
  /** The context the reference assumes (LongRoPE's factors); default the engine's maxContext. */
  context?: number;
}

/**
 * The engine of a whole-model check: every prompt row sampled (32 slots and rows), small blocks
 * and KV, no warm-up; `options` names the model and device and whatever differs.
 */
export async function withCheckEngine(
  options: Pick<EngineOptions, "modelDir" | "gpu"> & Partial<EngineOptions>,
  body: (engine: Engine) => Promise<void>,
): Promise<void> {
  const engine = await Engine.load({
    gpuKvMb: 1,
    maxSlots: 32,
    maxRows: 32,
    blockSize: 4,
    maxTopLogprobs: 1,
    ringSize: 2,
    skipWarmUp: true,
    ...options,
  });
  try {
    await body(engine);
  } finally {
    await engine.close();
  }
}

/** Prefills `prompt` random tokens, every row sampled, then decodes `generated` tokens greedily. */
export async function checkModel(
  engine: Engine,
  reference: ModelFiles,
  bound: number,
  what: string,
  check: ModelCheck,
): Promise<void> {
  const vocab = reference.config.vocabSize;
  const next = rng(vocab);
  const ids = Array.from({ length: check.prompt }, () => Math.floor(next() * vocab));
  const pool = new BlockPool(engine.info);
  const options = { context: check.context ?? engine.info.maxContext };
  let sampling = [{ slot: 0, params: { temperature: 0, topK: 0, topP: 1, seed: 0 } }];

  /** Runs positions [from, ids.length) and returns each row's logits and sampled id. */
  const step = async (from: number) => {
    const added = pool.growAll(0, ids.length)!;
    const tables = added.flatMap((blocks, layer) =>
      blocks.length === 0
        ? []
        : [{ slot: 0, layer, first: pool.table(0, layer).length - blocks.length, blocks }]
    );
    const rows = ids.slice(from).map((token, i) => ({ slot: 0, pos: from + i, token }));
    const samples = rows.map((_, row) => ({ row }));
    const records = await engine.step({ tables, sampling, rows, samples, wantTopLogprobs: false });
    sampling = [];
    return { logits: await engine.readLogits(rows.length), records };
  };

  const prefill = await step(0);
  const want = await referenceForward(reference, ids, options);
  prefill.logits.forEach((got, pos) => assertClose(got, want[pos], bound, `${what} pos ${pos}`));
  ids.push(prefill.records.at(-1)!.id);
  assertGreedy(want.at(-1)!, ids.at(-1)!, bound, `${what} step 0`);
  for (let s = 1; s <= check.generated; s++) {
    const { logits, records } = await step(ids.length - 1);
    const ref = await referenceForward(reference, ids, options);
    assertClose(logits[0], ref.at(-1)!, bound, `${what} decode ${s}`);
    ids.push(records[0].id);
    assertGreedy(ref.at(-1)!, ids.at(-1)!, bound, `${what} step ${s}`);
  }
  pool.release(0);
}

/** The GPU's greedy token is the reference's argmax, unless the two are tied within the bound. */
function assertGreedy(ref: Float64Array, chosen: number, bound: number, what: string): void {
  let best = 0, scale = 0;
  ref.forEach((v, i) => {
    if (v > ref[best]) best = i;
    scale = Math.max(scale, Math.abs(v));
  });
  if (chosen === best) return;
  assert(
    ref[best] - ref[chosen] <= 2 * bound * scale,
    `${what}: GPU chose ${chosen} (ref logit ${ref[chosen]}), reference ${best} (${ref[best]})`,
  );
  console.warn(`${what}: near-tie between ${chosen} and ${best}, accepted`);
}
