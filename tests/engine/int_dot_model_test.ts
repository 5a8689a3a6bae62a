// The integer-dot kernels in a whole model (--quant-kernels int: quantize_x, then matmul_int for
// every quantized matrix) against the float kernels (--quant-kernels float) on the same generated
// GGUF models, Q4_0, Q8_0 and a Q4_K_M mix (Q4_K with Q6_K), on one shared device.
//
// Both engines are fed the float path's greedy tokens (teacher forcing), so every position is
// compared on the same context. The int path rounds x to int8 blocks (per value within half of
// its block's max / 127), so its logits are not the float path's bits: they must stay within
// LOGIT_BOUND of them relative to the largest |logit| (measured about 2.5e-2 here; the float path's
// own rounding is 2e-4 .. 2e-2, gguf_model_test.ts), NaN never passes, and the int path's greedy
// token must be the float path's at every position unless the float logits of the two tokens are
// within that bound of each other (a near-tie, counted and printed). The choice itself (flag,
// cache, measurement, a runtime without the feature) is checked without a device.

import { join } from "node:path";
import { Engine } from "../../engine/engine.ts";
import { BlockPool } from "../../runtime/kv/block_pool.ts";
import type { TinyModelSpec } from "../../engine/sources/tiny_model.ts";
import type { GgmlTypeName } from "../../engine/formats/gguf.ts";
import { hasIntDot } from "../../engine/gpu/kernels/matmul_int.ts";
import { chooseQuantKernels } from "../../engine/forward/quant_kernel_choice.ts";
import type { CalibrationShape } from "../../engine/forward/matmul_choice.ts";
import type { Gpu } from "../../engine/gpu/device.ts";
import { relativeError } from "../helpers/compare.ts";
import { testGpu } from "../helpers/gpu.ts";
import { rng, testSeed } from "../helpers/random.ts";
import { assert, assertEquals, assertRejects } from "../helpers/testing.ts";
import { writeTinyGguf } from "../helpers/tiny_gguf.ts";

const SPEC: Omit<TinyModelSpec, "seed"> = {
  hiddenSize: 256,
  intermediateSize: 512,
  numLayers: 2,
  numHeads: 4,
  numKvHeads: 2,
  headDim: 64,
  tied: false,
  dtype: "F32",
};

const LOGIT_BOUND = 5e-2;
const PROMPT = 8;
const GENERATED = 12;

const q4kmMix = (name: string): GgmlTypeName | undefined =>
  /^blk\.0\.(attn_v|ffn_down)|^output\./.test(name) ? "Q6_K" : undefined;

const CASES: { name: string; type: GgmlTypeName; typeOf?: typeof q4kmMix }[] = [
  { name: "Q4_0", type: "Q4_0" },
  { name: "Q8_0", type: "Q8_0" },
  { name: "Q4_K_M mix", type: "Q4_K", typeOf: q4kmMix },
];

function load(gpu: Gpu, modelDir: string, quantKernels: "float" | "int"): Promise<Engine> {
  return Engine.load({
    modelDir,
    gpu,
    gpuKvMb: 1,
    maxSlots: 16,
    maxRows: 16,
    blockSize: 16,
    maxTopLogprobs: 1,
    ringSize: 2,
    matmulKernel: "storage",
    quantKernels,
    skipWarmUp: true,
  });
}

/** An engine fed a fixed token list one position at a time after the prompt: logits per step. */
function stepper(engine: Engine) {
  const pool = new BlockPool(engine.info);
  const greedy = { temperature: 0, topK: 0, topP: 1, seed: 0 };
  let sampling = [{ slot: 0, params: greedy }];
  let done = 0;
  return {
    /** Runs positions [done, ids.length) and returns the last row's logits and greedy id. */
    async run(ids: number[]) {
      const added = pool.growAll(0, ids.length)!;
      const tables = added.flatMap((blocks, layer) =>
        blocks.length === 0
          ? []
          : [{ slot: 0, layer, first: pool.table(0, layer).length - blocks.length, blocks }]
      );
      const rows = ids.slice(done).map((token, i) => ({ slot: 0, pos: done + i, token }));
      const records = await engine.step({
        tables,
        sampling,
        rows,
        samples: [{ row: rows.length - 1 }],
        wantTopLogprobs: false,
      });
      sampling = [];
      done = ids.length;
      return { logits: (await engine.readLogits(1))[0], id: records[0].id };
    },
    release: () => pool.release(0),
  };
}

for (const c of CASES) {
  Deno.test(`int-dot kernels in a ${c.name} model: the float path's greedy tokens and logits`, async () => {
    if (!hasIntDot()) return; // the float path is all such a runtime has
    const gpu = await testGpu();
    const seed = testSeed();
    const dir = await Deno.makeTempDir({ prefix: "sluice-int-dot-" });
    const engines: Engine[] = [];
    try {
      const g = await writeTinyGguf(dir, { ...SPEC, seed }, { type: c.type, typeOf: c.typeOf });
      const float = await load(gpu, g.path, "float");
      engines.push(float);
      const int = await load(gpu, g.path, "int");
      engines.push(int);
      assertEquals(int.info.quantKernels?.kernels, "int");
      assertEquals(float.info.quantKernels?.kernels, "float");
      // One quantize_x per matrix: the int list is longer, so the int kernels did run.
      assert(int.info.dispatchesPerStep > float.info.dispatchesPerStep, "no int kernels bound");

      const next = rng(seed);
      const ids = Array.from({ length: PROMPT }, () => Math.floor(next() * float.config.vocabSize));
      const f = stepper(float), i = stepper(int);
      let agree = 0, ties = 0, worst = 0;
      for (let s = 0; s <= GENERATED; s++) {
        const a = await f.run(ids), b = await i.run(ids);
        const { maxRelError } = relativeError(b.logits, a.logits);
        worst = Math.max(worst, maxRelError);
        const what = `${c.name} seed ${seed} step ${s}`;
        assert(maxRelError <= LOGIT_BOUND, `${what}: logits off by ${maxRelError} (relative)`);
        if (a.id === b.id) {
          agree++;
        } else {
          let scale = 0;
          for (const v of a.logits) scale = Math.max(scale, Math.abs(v));
          const gap = a.logits[a.id] - a.logits[b.id];
          assert(gap <= LOGIT_BOUND * scale, `${what}: int chose ${b.id}, float ${a.id}`);
          ties++;
        }
        ids.push(a.id);
      }
      console.log(
        `${c.name}: ${agree}/${GENERATED + 1} greedy tokens agree (${ties} near-ties), ` +
          `logits within ${worst.toExponential(2)} of the float path's (relative)`,
      );
      f.release();
      i.release();
    } finally {
      for (const e of engines) await e.close();
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("--quant-kernels: flag, cache and measurement choose; int without the feature refuses", async () => {
  const gpu = { adapterName: "test adapter", f16: true } as Gpu;
  const cacheDir = await Deno.makeTempDir({ prefix: "sluice-quant-choice-" });
  try {
    const shapes: CalibrationShape[] = [
      { K: 256, N: 512, mode: "store", count: 2, format: "q4_0" },
      { K: 256, N: 256, mode: "add", count: 2 },
    ];
    let measured = 0;
    const measure = (_: Gpu, s: CalibrationShape[], layout: string) => {
      assertEquals(layout, "storage");
      measured++;
      assertEquals(s.length, 1, "only the quantized shapes are timed");
      return Promise.resolve({ float: 30, int: 20 });
    };
    assertEquals(
      (await chooseQuantKernels(gpu, shapes, { flag: "float", cacheDir, measure })).kernels,
      "float",
    );
    assertEquals(
      (await chooseQuantKernels(gpu, [shapes[1]], { flag: "auto", cacheDir, measure })).source,
      "none",
    );
    if (hasIntDot()) {
      const first = await chooseQuantKernels(gpu, shapes, { flag: "auto", cacheDir, measure });
      assertEquals([first.kernels, first.source], ["int", "measured"]);
      const again = await chooseQuantKernels(gpu, shapes, { flag: "auto", cacheDir, measure });
      assertEquals([again.kernels, again.source, measured], ["int", "cache", 1]);
      assert((await Deno.readTextFile(join(cacheDir, "quant.json"))).includes("q4_0"));
    } else {
      await assertRejects(
        () => chooseQuantKernels(gpu, shapes, { flag: "int", cacheDir, measure }),
        Error,
        "packed_4x8_integer_dot_product",
      );
      const auto = await chooseQuantKernels(gpu, shapes, { flag: "auto", cacheDir, measure });
      assertEquals([auto.kernels, auto.source, measured], ["float", "unsupported", 0]);
    }
  } finally {
    await Deno.remove(cacheDir, { recursive: true });
  }
});
